package imagecache

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// progress creates what the caps allow, settles what finished, writes
// progress now and then, and finishes the operation once all is settled.
func (r *Reconciler) progress(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	if op.final != nil {
		return r.pinThenFinish(ctx, cache, op)
	}
	retry := r.createJobs(ctx, cache, op)
	next, err := r.settle(ctx, cache, op)
	if err != nil {
		return ctrl.Result{}, err
	}
	if op.final != nil {
		return r.pinThenFinish(ctx, cache, op)
	}
	// Settling may have freed slots for this very operation; a create
	// being retried has its own time.
	if op.counts.Waiting > 0 && op.counts.InFlight == 0 && retry == 0 {
		next = 0
	}
	if retry > 0 && (next == 0 || retry < next) {
		next = retry
	}
	wait, err := r.statusWriter().WriteProgress(ctx, cache, op.counts, &op.pace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait > 0 && (next == 0 || wait < next) {
		next = wait
	}
	if next <= 0 {
		next = time.Second
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// pinThenFinish finishes an operation whose pulls have all settled, once
// its pin phase (pinning.go), when its cache pins, is over too.
func (r *Reconciler) pinThenFinish(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	if done, next := r.pinStep(ctx, cache, op); !done {
		return ctrl.Result{RequeueAfter: next}, nil
	}
	return r.finish(ctx, cache, op)
}
