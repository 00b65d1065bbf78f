package jobs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources are the requests and limits the controller's flags
// (--job-cpu-request, --job-memory-request, --job-cpu-limit,
// --job-memory-limit) give every container of every Job: the helper
// installer, each pull container of a node Job, the delete container. A nil
// quantity keeps that container's own default. They exist for namespaces
// whose ResourceQuota or LimitRange demands what the defaults leave out
// (limits.cpu above all), which would otherwise refuse every pod.
type Resources struct {
	CPURequest, MemoryRequest *resource.Quantity
	CPULimit, MemoryLimit     *resource.Quantity
}

// Validate refuses what the API server would refuse in every pod: a
// request above its limit, a negative quantity, a zero limit.
func (r Resources) Validate() error {
	for _, q := range []struct {
		flag string
		q    *resource.Quantity
	}{{"--job-cpu-request", r.CPURequest}, {"--job-memory-request", r.MemoryRequest}} {
		if q.q != nil && q.q.Sign() < 0 {
			return fmt.Errorf("%s=%s is negative", q.flag, q.q)
		}
	}
	for _, q := range []struct {
		flag string
		q    *resource.Quantity
	}{{"--job-cpu-limit", r.CPULimit}, {"--job-memory-limit", r.MemoryLimit}} {
		if q.q != nil && q.q.Sign() <= 0 {
			return fmt.Errorf("%s=%s is not above zero: give a positive limit, or none for the default", q.flag, q.q)
		}
	}
	for _, p := range []struct {
		name       string
		req, limit *resource.Quantity
	}{{"cpu", r.CPURequest, r.CPULimit}, {"memory", r.MemoryRequest, r.MemoryLimit}} {
		if p.req != nil && p.limit != nil && p.req.Cmp(*p.limit) > 0 {
			return fmt.Errorf("--job-%s-request=%s is above --job-%s-limit=%s: a container's request may not exceed its limit",
				p.name, p.req, p.name, p.limit)
		}
	}
	return nil
}

// apply puts the quantities set over a container's defaults. A default
// request above a limit set is lowered to that limit, as the API server
// would refuse the pair: a user who sets only --job-cpu-limit=5m gets
// 5m requested, not a refused pod.
func (r Resources) apply(def corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range def.Requests {
		out.Requests[k] = v.DeepCopy()
	}
	for k, v := range def.Limits {
		out.Limits[k] = v.DeepCopy()
	}
	set := func(l corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q != nil {
			l[name] = q.DeepCopy()
		}
	}
	set(out.Requests, corev1.ResourceCPU, r.CPURequest)
	set(out.Requests, corev1.ResourceMemory, r.MemoryRequest)
	set(out.Limits, corev1.ResourceCPU, r.CPULimit)
	set(out.Limits, corev1.ResourceMemory, r.MemoryLimit)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := out.Requests[name]
		limit, hasLimit := out.Limits[name]
		if hasReq && hasLimit && req.Cmp(limit) > 0 {
			out.Requests[name] = limit.DeepCopy()
		}
	}
	return out
}

// smallResources are the default of a container that runs one of our
// helpers alone: the installer, the delete, a per-(image, node) pull.
func smallResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
}

// sharedResources are the default of a node Job's pull containers: each
// only execs a helper that exits, and 32 of them asking what a lone one
// does (half a GiB) would keep the pod off small nodes.
func sharedResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("4Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
}
