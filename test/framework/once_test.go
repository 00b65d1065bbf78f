package framework

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

// fatalTB records a Fatal instead of failing the test that runs it.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

// get calls o.Get as a test of its own would, and says what it failed with.
func get[T any](o *Once[T], setUp func() (T, error)) (v T, fatal string) {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		v = o.Get(tb, setUp)
	}()
	<-done
	return v, tb.fatal
}

func TestOnce(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	var ok Once[string]
	for range 2 {
		v, fatal := get(&ok, func() (string, error) { calls++; return "built", nil })
		g.Expect(v).To(Equal("built"))
		g.Expect(fatal).To(BeEmpty())
	}
	g.Expect(calls).To(Equal(1), "set up once for every test")

	var broken Once[string]
	for range 2 {
		_, fatal := get(&broken, func() (string, error) { return "", errors.New("no compiler") })
		g.Expect(fatal).To(Equal("no compiler"), "every test that needs it fails, not only the first")
	}
}
