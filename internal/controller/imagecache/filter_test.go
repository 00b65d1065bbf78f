package imagecache

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// The watches' filters decide which events wake caches: one that lets too
// little through leaves a node or a pod unseen until the next refresh.
func TestWatchFilters(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "a"}}}}
	relabelled := pod.DeepCopy()
	relabelled.Labels = map[string]string{"app": "x"}
	otherImage := pod.DeepCopy()
	otherImage.Spec.Containers[0].Image = "b"
	running := pod.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	pullFailing := pod.DeepCopy()
	pullFailing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "pull", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	nsRelabelled := ns.DeepCopy()
	nsRelabelled.Labels = map[string]string{"team": "x"}

	type want struct{ create, delete, generic, update bool }
	tests := []struct {
		name     string
		filter   predicate.Predicate
		old, new client.Object
		want     want
	}{
		{"a node that joins passes, one that leaves does not", nodeChanges(), node, node.DeepCopy(), want{create: true}},
		{"a cordoned node passes", nodeChanges(), node, cordoned, want{create: true, update: true}},
		{"a pod that changes image passes", podChanges(), pod, otherImage, want{create: true, delete: true, update: true}},
		{"a relabelled pod passes", podChanges(), pod, relabelled, want{create: true, delete: true, update: true}},
		{"a pod's status does not", podChanges(), pod, running, want{create: true, delete: true}},
		{"a relabelled namespace passes", podChanges(), ns, nsRelabelled, want{create: true, delete: true, update: true}},
		{"a node Job's pod that changes state passes", jobPodChanges(true), pod, running, want{update: true}},
		{"an image Job's pod does not", jobPodChanges(false), pod, running, want{}},
		{"an image Job's pod that fails to pull passes", jobPodChanges(false), pod, pullFailing, want{update: true}},
		{"nor again once it does", jobPodChanges(false), pullFailing, pullFailing.DeepCopy(), want{}},
		{"a Job pod's spec does not", jobPodChanges(true), pod, otherImage, want{}},
		{"an update of another type does not", nodeChanges(), pod, running, want{create: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := want{
				create:  tt.filter.Create(event.CreateEvent{Object: tt.new}),
				delete:  tt.filter.Delete(event.DeleteEvent{Object: tt.new}),
				generic: tt.filter.Generic(event.GenericEvent{Object: tt.new}),
				update:  tt.filter.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}),
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
