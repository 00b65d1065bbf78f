package claim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "", want: ""},
		{in: Default, want: Default},
		{in: "ns/a.b-c", want: "ns/a.b-c"},
		{in: "kube-system", err: "want NAMESPACE/NAME"},
		{in: "/name", err: "want NAMESPACE/NAME"},
		{in: "ns/", err: "want NAMESPACE/NAME"},
		{in: "Kube_System/x", err: "namespace"},
		{in: "ns/Bad_Name", err: "name"},
	} {
		p, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, p, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, p.String(), err, tc.want)
		}
	}
}

func TestTimingsValidate(t *testing.T) {
	for _, tc := range []struct {
		in  Timings
		err string
	}{
		{in: DefaultTimings},
		{in: fast},
		{in: Timings{Duration: 2 * time.Minute, Renew: 90 * time.Second, Retry: 2 * time.Second}},
		{in: Timings{Duration: 10 * time.Second, Renew: 10 * time.Second, Retry: time.Second}, err: "lease-duration (10s) must be longer than"},
		{in: Timings{Duration: 15 * time.Second, Renew: 20 * time.Second, Retry: time.Second}, err: "lease-duration (15s) must be longer than"},
		{in: Timings{Duration: 15 * time.Second, Renew: 2400 * time.Millisecond, Retry: 2 * time.Second}, err: "renew-deadline (2.4s) must be longer than 1.2 × --leader-election-retry-period (2s)"},
	} {
		err := tc.in.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: %v; want an error with %q", tc.in, err, tc.err)
		}
	}
}

// fast are timings for claims on a fake clientset, where nothing is slow;
// a deadline of wait is what only a defect reaches.
var fast = Timings{Duration: 2 * time.Second, Renew: time.Second, Retry: 50 * time.Millisecond}

const wait = time.Minute

type contender struct {
	*Claim
	events  *record.FakeRecorder
	standby chan bool
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, cs *fake.Clientset, identity string) *contender {
	t.Helper()
	c := &contender{events: record.NewFakeRecorder(10), standby: make(chan bool, 10), done: make(chan error, 1)}
	c.Claim = New(Place{Namespace: "kube-system", Name: "kubefledged-controller"}, identity, cs, c.events)
	c.Timings = fast
	c.StandingBy = func(b bool) { c.standby <- b }
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- c.Start(ctx) }()
	t.Cleanup(cancel)
	return c
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
	}
	var zero T
	return zero
}

func event(t *testing.T, c *contender, reason string) string {
	t.Helper()
	for {
		e := receive(t, c.events.Events, "event "+reason)
		if strings.Contains(e, reason) {
			return e
		}
	}
}

// The second install stands by, with an Event naming the first, and takes
// over as soon as the first stops.
func TestSecondInstallStandsByUntilFirstStops(t *testing.T) {
	cs := fake.NewClientset()
	first := start(t, cs, "ns-a/controller-1")
	receive(t, first.Held(), "claim held by the first install")
	if got := receive(t, first.standby, "standby report"); got {
		t.Fatal("the holder reported standing by")
	}
	event(t, first, ReasonClaimed)

	second := start(t, cs, "ns-b/controller-1")
	if got := receive(t, second.standby, "standby report"); !got {
		t.Fatal("the second install did not report standing by")
	}
	e := event(t, second, ReasonStandingBy)
	if !strings.Contains(e, "ns-a/controller-1") || !strings.HasPrefix(e, "Warning") {
		t.Errorf("standing-by event %q: want a Warning naming the holder", e)
	}
	select {
	case <-second.Held():
		t.Fatal("both installs hold the claim")
	default:
	}

	first.cancel()
	if err := receive(t, first.done, "first claim's end"); err != nil {
		t.Errorf("a claim stopped by its context returned %v", err)
	}
	receive(t, second.Held(), "claim held by the second install after the first stopped")
	if got := receive(t, second.standby, "standby report"); got {
		t.Error("the new holder still reports standing by")
	}
}

// A holder that can no longer renew the claim (the API server refuses, or
// another install took it) stops with ErrLost rather than work on without it.
func TestLostClaimStops(t *testing.T) {
	cs := fake.NewClientset()
	c := start(t, cs, "ns-a/controller-1")
	receive(t, c.Held(), "claim held")
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "kubefledged-controller", errors.New("taken"))
	})
	if err := receive(t, c.done, "claim's end after losing it"); err != ErrLost {
		t.Errorf("Start = %v, want ErrLost", err)
	}
}
