package metrics

import "sync"

// source is what a scrape-time collector reads its series from. A collector
// is registered once per process, but tests start several controllers in
// turn, each with its own client: each start replaces the source while
// scrapes may be running.
type source[T any] struct {
	mu sync.Mutex
	v  T
}

func (s *source[T]) set(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = v
}

func (s *source[T]) get() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}
