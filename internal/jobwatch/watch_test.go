package jobwatch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func fullJob() *batchv1.Job {
	now := metav1.NewTime(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "j", Namespace: "ns", UID: "u", ResourceVersion: "9", CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:          map[string]string{"app": "kubefledged", "kubefledged.io/operation": "op1"},
			Annotations:     map[string]string{"kubefledged.io/image": "example.test/a:1"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubefledged"}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubefledged.io/v1alpha2", Kind: "ImageCache", Name: "c", UID: "cu", Controller: ptr.To(true)}},
		},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.test/a:1"}}}}},
		Status: batchv1.JobStatus{Failed: 1, StartTime: &now, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}},
	}
}

func TestRecord(t *testing.T) {
	tests := []struct {
		name  string
		in    any
		check func(g Gomega, out any)
	}{
		{"a Job keeps its identity, controller, start and conditions", fullJob(), func(g Gomega, out any) {
			j := out.(*Job)
			want := fullJob()
			g.Expect(j.ObjectMeta).To(Equal(metav1.ObjectMeta{
				Name: "j", Namespace: "ns", UID: "u", ResourceVersion: "9",
				CreationTimestamp: want.CreationTimestamp, DeletionTimestamp: want.DeletionTimestamp,
				OwnerReferences: want.OwnerReferences,
			}))
			g.Expect(j.Conditions).To(Equal(want.Status.Conditions))
			g.Expect(j.StartTime).To(Equal(want.Status.StartTime))
			g.Expect(metav1.GetControllerOf(j)).To(Equal(&want.OwnerReferences[0]))
		}},
		{"as a Job it has only those", fullJob(), func(g Gomega, out any) {
			j := out.(*Job).AsJob()
			g.Expect(j.Spec).To(Equal(batchv1.JobSpec{}))
			g.Expect(j.Labels).To(BeNil())
			g.Expect(j.Status).To(Equal(batchv1.JobStatus{StartTime: fullJob().Status.StartTime, Conditions: fullJob().Status.Conditions}))
		}},
		{"a delete Job in the controller's namespace keeps the annotation naming its cache", func() *batchv1.Job {
			j := fullJob()
			j.OwnerReferences = nil
			j.Annotations["kubefledged.io/imagecache"] = "apps/c"
			return j
		}(), func(g Gomega, out any) {
			g.Expect(out.(*Job).Annotations).To(Equal(map[string]string{"kubefledged.io/imagecache": "apps/c"}))
		}},
		{"tombstones pass through", cache.DeletedFinalStateUnknown{Key: "ns/j"}, func(g Gomega, out any) {
			g.Expect(out).To(Equal(cache.DeletedFinalStateUnknown{Key: "ns/j"}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Record(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, out)
		})
	}
}

func TestDeepCopyObjectIsDeep(t *testing.T) {
	g := NewWithT(t)
	rec, _ := Record(fullJob())
	orig := rec.(*Job)
	cp := orig.DeepCopyObject().(*Job)
	g.Expect(cp).To(Equal(orig))
	cp.Conditions[0].Reason = "changed"
	cp.OwnerReferences[0].Name = "changed"
	cp.StartTime.Time = cp.StartTime.Add(time.Hour)
	g.Expect(orig.Conditions[0].Reason).To(Equal("BackoffLimitExceeded"))
	g.Expect(orig.OwnerReferences[0].Name).To(Equal("c"))
	g.Expect(orig.StartTime.Hour()).To(Equal(9))
}
