package framework

import (
	"sync"
	"testing"
)

// Once holds what a suite sets up for all its tests at the first one that needs it (a
// binary built, a cluster's CRDs and RBAC applied, a document section read). Setting up
// in TestMain would cost every run, even one of a single test that needs none of it.
// A setup that failed fails every test that needs it, not only the first: each would
// otherwise go on with a zero value.
type Once[T any] struct {
	once sync.Once
	v    T
	err  error
}

// Get returns what setUp returned at the first Get, calling it then, or fails t with its
// error.
func (o *Once[T]) Get(t testing.TB, setUp func() (T, error)) T {
	t.Helper()
	o.once.Do(func() { o.v, o.err = setUp() })
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.v
}
