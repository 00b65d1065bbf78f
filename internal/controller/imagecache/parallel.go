package imagecache

import "sync"

// inParallel calls fn for each of n items, at most limit calls at a time, and
// returns once all have returned: how many failed and the first error, in
// item order. A reconcile sends its Job creates, deletes and labels this way,
// so that thousands of calls take seconds, not minutes, without flooding the
// API server (client-go's rate limiter still paces them).
func inParallel(n, limit int, fn func(i int) error) (failed int, first error) {
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	return failed, first
}
