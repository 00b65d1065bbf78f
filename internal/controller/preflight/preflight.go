// Package preflight is the controller's start-up clean-up: before any
// operation starts, every Job the controller ever made is deleted (retained
// ones included) and every cache left in Processing is marked Aborted so it
// runs again. It runs once per leadership, as the original did at start-up.
//
// It aborts through cachestatus, the one home of status writes, and does
// not import the reconciler's package: the reconciler waits for this
// clean-up before any operation starts, so the clean-up must not depend on
// it in turn. Both stand on cachestatus, which imports neither.
package preflight

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// Cleanup is a leader-elected manager Runnable.
type Cleanup struct {
	// Client must read from the API server, not from a cache that may not
	// have synced: a Job missed here would outlive the restart.
	Client client.Client
	Clock  clock.Clock
	// After, when set, is closed once this install may work: it holds the
	// cluster-wide claim (internal/claim). Until then another install's
	// Jobs are not ours to delete.
	After <-chan struct{}
	done  chan struct{}
}

// New returns a Cleanup; Done is closed when it has finished.
func New(c client.Client) *Cleanup {
	return &Cleanup{Client: c, Clock: clock.RealClock{}, done: make(chan struct{})}
}

// Done is closed once the clean-up succeeded.
func (p *Cleanup) Done() <-chan struct{} { return p.done }

// NeedLeaderElection: only the leader may delete Jobs and abort caches.
func (p *Cleanup) NeedLeaderElection() bool { return true }

// Start retries the clean-up with backoff until it succeeds or ctx ends, then
// signals Done and returns; it never gives up on a transient API error.
func (p *Cleanup) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("preflight")
	if p.After != nil {
		select {
		case <-p.After:
		case <-ctx.Done():
			return nil
		}
	}
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 10 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := p.run(ctx); err != nil {
			logger.Error(err, "start-up clean-up failed; retrying")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	close(p.done)
	return nil
}

func (p *Cleanup) run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("preflight")
	list := &batchv1.JobList{}
	if err := p.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: jobs.ManagedSelector()}); err != nil {
		return fmt.Errorf("listing leftover jobs: %w", err)
	}
	namespaces := map[string]bool{}
	for _, j := range list.Items {
		namespaces[j.Namespace] = true
	}
	for ns := range namespaces {
		if err := p.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
			client.MatchingLabelsSelector{Selector: jobs.ManagedSelector()},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return fmt.Errorf("deleting leftover jobs in %s: %w", ns, err)
		}
	}
	caches := &v1alpha2.ImageCacheList{}
	if err := p.Client.List(ctx, caches); err != nil {
		return fmt.Errorf("listing image caches: %w", err)
	}
	aborted := 0
	for i := range caches.Items {
		c := &caches.Items[i]
		if c.Status.Status != v1alpha2.ImageCacheActionStatusProcessing {
			continue
		}
		key := client.ObjectKeyFromObject(c)
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			fresh := &v1alpha2.ImageCache{}
			if err := p.Client.Get(ctx, key, fresh); err != nil {
				return client.IgnoreNotFound(err)
			}
			if fresh.Status.Status != v1alpha2.ImageCacheActionStatusProcessing {
				return nil
			}
			// A transition on a fresh read: one that conflicts
			// is tried again on the cache as it is now.
			cachestatus.Abort(fresh, p.Clock.Now())
			return cachestatus.Writer{Client: p.Client}.WriteTransition(ctx, fresh)
		})
		if err != nil {
			return fmt.Errorf("aborting %s: %w", key, err)
		}
		aborted++
	}
	logger.Info("start-up clean-up done", "jobsDeleted", len(list.Items), "cachesAborted", aborted)
	return nil
}
