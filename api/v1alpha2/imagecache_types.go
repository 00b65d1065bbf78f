package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations that ask for an operation on demand. Their value is ignored; the
// controller removes them when the operation ends. Purge wins over refresh.
const (
	RefreshAnnotation = "kubefledged.io/refresh-imagecache"
	PurgeAnnotation   = "kubefledged.io/purge-imagecache"
)

// CacheSpecImages is one list of images and the nodes they are cached on.
// The images are named, found in the pods that fromPods selects, in the pod
// templates of the workloads that fromWorkloads selects, or any mix: a list
// of the images a workload might roll out to beside the ones it runs now is
// a usual one.
// +kubebuilder:validation:XValidation:rule="(has(self.images) && size(self.images) > 0) || has(self.fromPods) || has(self.fromWorkloads)",message="a list needs images, fromPods or fromWorkloads: name images to cache, or select the pods or workloads whose images to cache"
type CacheSpecImages struct {
	// Images to keep cached on every matching node.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=atomic
	Images []string `json:"images,omitempty"`

	// FromPods caches the images of the pods it selects, as they come and
	// go: every container, init container and ephemeral container image.
	// +optional
	FromPods *FromPods `json:"fromPods,omitempty"`

	// FromWorkloads caches the images of the pod templates of the
	// Deployments, StatefulSets, DaemonSets and CronJobs it selects, as soon
	// as a template changes: a paused or slow rollout finds its new images
	// cached before its pods need them.
	// +optional
	FromWorkloads *FromWorkloads `json:"fromWorkloads,omitempty"`

	// NodeSelector chooses the nodes of this list; all nodes when empty.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations, when set, replace the original's tolerate-every-taint:
	// the list's Jobs carry exactly these, and only nodes whose NoSchedule
	// and NoExecute taints they tolerate are used.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// FromPods selects pods by their namespace's labels and their own, with the
// meaning NetworkPolicy gives the pair, which users already know: no
// namespaceSelector is the ImageCache's own namespace, an empty one ({}) is
// every namespace; no podSelector, or an empty one, is every pod. A pod's
// images are cached while it exists, whatever its phase: the images of a
// CronJob's finished pods stay cached for its next run. The controller's own
// pull Jobs are never counted.
type FromPods struct {
	// NamespaceSelector chooses the namespaces by their labels.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector chooses the pods in those namespaces by their labels.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// FromWorkloads selects workloads (Deployments, StatefulSets, DaemonSets and
// CronJobs) with the same two selectors as FromPods, and the same meaning of
// absent and empty: the namespaceSelector picks namespaces by their labels,
// the podSelector picks workloads by the labels of their pod template, the
// labels their pods will carry, so that one selector serves a fromPods and a
// fromWorkloads alike. Every image of a selected template (containers and
// init containers; a CronJob's job template) is cached while the workload
// exists, whether or not a pod runs it yet.
type FromWorkloads struct {
	// NamespaceSelector chooses the namespaces by their labels.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector chooses the workloads in those namespaces by the labels of
	// their pod template.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// ImageCacheSpec is the desired set of cached images.
//
// Nothing in the schema bounds the spec's total size (64 lists of 256 images
// of 512 characters would be 8 MiB, and the object, which keeps a copy of the
// spec in its status, must fit etcd's 1.5 MiB): a CEL rule summing the lists'
// references is refused as too costly by the API server of Kubernetes 1.27,
// the oldest we claim, whose cost estimate cannot bound a list that a macro
// builds, and with it the whole CRD. The webhook refuses
// a spec over MaxSpecBytes at admission, and without it the controller
// declines one with SpecTooLarge.
type ImageCacheSpec struct {
	// CacheSpec lists the images and the nodes to cache them on. The number
	// of lists is fixed at creation: an update is matched to what was cached
	// list by list, by index, so the webhook refuses adding or removing one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	CacheSpec []CacheSpecImages `json:"cacheSpec"`

	// ImagePullSecrets are secrets in the ImageCache's namespace used by every
	// pull Job.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Pin, when true, pins every image of the cache on the nodes that hold
	// it, so that the kubelet's image garbage collection never deletes it
	// between two refreshes; a purge, an update that drops an image, or
	// deleting the cache unpins it first. Pinning needs containerd 1.7 or
	// newer on the node: other runtimes get PinUnsupported in
	// status.pins.unsupported, and their images are still cached. Absent,
	// the controller's --pin-images decides (default false).
	// +optional
	Pin *bool `json:"pin,omitempty"`
}

// ImageCacheActionStatus is the state of the latest operation.
// +kubebuilder:validation:Enum=Processing;Succeeded;Failed;Aborted;NoImagesPulledOrDeleted;Unknown
type ImageCacheActionStatus string

// Status values, the original's vocabulary.
const (
	ImageCacheActionStatusProcessing              ImageCacheActionStatus = "Processing"
	ImageCacheActionStatusSucceeded               ImageCacheActionStatus = "Succeeded"
	ImageCacheActionStatusFailed                  ImageCacheActionStatus = "Failed"
	ImageCacheActionStatusAborted                 ImageCacheActionStatus = "Aborted"
	ImageCacheActionStatusNoImagesPulledOrDeleted ImageCacheActionStatus = "NoImagesPulledOrDeleted"
	ImageCacheActionStatusUnknown                 ImageCacheActionStatus = "Unknown"
)

// Reasons name the operation that set the status, the original's vocabulary.
const (
	ImageCacheReasonImageCacheCreate  = "ImageCacheCreate"
	ImageCacheReasonImageCacheUpdate  = "ImageCacheUpdate"
	ImageCacheReasonImageCacheRefresh = "ImageCacheRefresh"
	ImageCacheReasonImageCachePurge   = "ImageCachePurge"
	ImageCacheReasonImagePullAborted  = "ImagePullAborted"
	// ImageCacheReasonImageCacheNewNodes is ours: images pulled onto nodes
	// that joined or came to match a list, without a full refresh.
	ImageCacheReasonImageCacheNewNodes = "ImageCacheNewNodes"
)

// Messages, verbatim from the original v0.10 (its spelling of "succesfully"
// included): users' alerts and scripts match on them. Detail of our own goes
// to the conditions and Events, never into these.
const (
	// Processing, one per operation.
	ImageCacheMessagePullingImages   = "Images are being pulled on to the nodes. Please view the status after some time"
	ImageCacheMessageUpdatingCache   = "Image cache is being updated. Please view the status after some time"
	ImageCacheMessageRefreshingCache = "Image cache is being refreshed. Please view the status after some time"
	ImageCacheMessagePurgingCache    = "Image cache is being purged. Please view the status after some time"

	ImageCacheMessageImagesPulledSuccessfully       = "All requested images pulled succesfully to respective nodes"
	ImageCacheMessageImagesDeletedSuccessfully      = "All cached images succesfully deleted from respective nodes"
	ImageCacheMessageImagePullFailedForSomeImages   = "Image pull failed for some images. Please see \"failures\" section"
	ImageCacheMessageImageDeleteFailedForSomeImages = "Image deletion failed for some images. Please see \"failures\" section"
	ImageCacheMessageNoImagesPulledOrDeleted        = "No images were pulled or deleted because nodeSelector specified did not match any nodes"
	ImageCacheMessagePullingAborted                 = "Image cache processing aborted. Image cache will get refreshed during next refresh cycle"
)

// MaxSpecBytes bounds the JSON of a spec the controller acts on. The status
// keeps a copy of the spec (processedSpec) beside up to MaxFailures failures,
// kubectl apply a third copy in an annotation, and etcd refuses objects over
// 1.5 MiB: a larger spec could run but never record its end. 256 KiB is over
// 3,000 images of usual length; more belongs in several caches.
const MaxSpecBytes = 256 << 10

// NodeReasonMessage says why an image failed on one node.
type NodeReasonMessage struct {
	Node    string `json:"node"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// NodeReasonMessageList is the list of failures of one image.
type NodeReasonMessageList []NodeReasonMessage

// ImageCacheStatus reports the latest operation. The first six fields are the
// original's; the rest let the controller resume its work level-based.
type ImageCacheStatus struct {
	Status  ImageCacheActionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
	// Failures maps an image to the nodes it failed on.
	// +optional
	Failures map[string]NodeReasonMessageList `json:"failures,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// ObservedGeneration is the generation of the spec the latest finished
	// operation acted on; a larger metadata.generation means an update is due.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// The schema of ProcessedSpec checks nothing: it records what the
	// controller acted on, and must be storable whatever that was. A cache
	// stored before the spec's bounds existed (the original kube-fledged's,
	// kept through CRD validation ratcheting) keeps working out of bounds;
	// with the bounds here too, its copy made every final status write
	// invalid, and the cache stayed Processing for good.

	// ProcessedSpec is the cache spec as the latest finished operation left it
	// on the nodes. An update pulls what the spec gained over it and deletes
	// what it lost, list by list. A record, not validated.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ProcessedSpec *ImageCacheSpec `json:"processedSpec,omitempty"`

	// Counts of the latest operation's (image, node) pairs.
	// +optional
	Counts *Counts `json:"counts,omitempty"`
	// Progress is done/desired of the latest operation, e.g. 950/1000.
	// +optional
	Progress string `json:"progress,omitempty"`
	// FailuresOmitted counts failures left out of the failures map, which
	// is bounded so that the object stays small on large clusters.
	// +optional
	FailuresOmitted int32 `json:"failuresOmitted,omitempty"`
	// Kept maps an image that the latest operation's deletes (a purge, an
	// update that dropped it) left on a node to why, per node: InUse (a
	// container there that has not exited uses it) or Pinned (the runtime
	// pins it, as its sandbox image, or another cache does). Not failures:
	// the deletes removed what was safe to remove. Bounded like failures.
	// +optional
	Kept map[string]NodeReasonMessageList `json:"kept,omitempty"`
	// KeptOmitted counts the kept pairs left out of kept for size.
	// +optional
	KeptOmitted int32 `json:"keptOmitted,omitempty"`
	// RefreshedTime is when the latest operation over every image and every
	// eligible node (a create or a refresh) ended. The periodic refresh counts
	// from it: new-node operations end often on a cluster whose nodes come
	// and go, and must not postpone it.
	// +optional
	RefreshedTime *metav1.Time `json:"refreshedTime,omitempty"`
	// SkippedNodes are the nodes a list selects but the latest operation
	// left out, by reason: Cordoned, NotReady, TaintNotTolerated, NotLinux,
	// UnsupportedArch, VirtualNode.
	// +optional
	// +listType=map
	// +listMapKey=reason
	SkippedNodes []SkippedNodes `json:"skippedNodes,omitempty"`
	// PodImages are the images the lists' fromPods and fromWorkloads found,
	// as the cache holds them: by list, what is cached and which pods and
	// workloads name it.
	// +optional
	// +listType=map
	// +listMapKey=list
	PodImages []ListPodImages `json:"podImages,omitempty"`
	// Conditions: Ready (every node a list selects holds every image: False
	// with reason Failed when a pair failed, NodesSkipped when a node the
	// pulls left out lacks an image) and Progressing (an operation runs),
	// for GitOps tools; PodsResolved when a list has fromPods or
	// fromWorkloads.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Pins is what this cache holds pinned on the nodes, when it pins.
	// +optional
	Pins *PinStatus `json:"pins,omitempty"`
}

// PinStatus is what a cache that pins holds pinned, and where it cannot.
// It is bounded like podImages, so that the object stays small on large
// clusters.
type PinStatus struct {
	// Images says, per image, on how many nodes this cache holds it pinned;
	// at most MaxPodImages of them, the rest counted in Omitted.
	// +optional
	// +listType=map
	// +listMapKey=image
	Images []PinnedImage `json:"images,omitempty"`
	// +optional
	Omitted int32 `json:"omitted,omitempty"`
	// Unsupported are the nodes whose runtime cannot pin, by reason
	// (PinUnsupported): not containerd 1.7 or newer. Their images are still
	// cached, and the kubelet may garbage-collect them there.
	// +optional
	// +listType=map
	// +listMapKey=reason
	Unsupported []SkippedNodes `json:"unsupported,omitempty"`
	// Failures are (image, node) pairs whose pin failed, at most
	// MaxPinFailures, the rest counted in FailuresOmitted. They do not fail
	// the operation: the image is cached, only not protected.
	// +optional
	// +listType=atomic
	Failures []PinFailure `json:"failures,omitempty"`
	// +optional
	FailuresOmitted int32 `json:"failuresOmitted,omitempty"`
}

// PinnedImage is one image and the number of nodes it is pinned on.
type PinnedImage struct {
	Image string `json:"image"`
	Nodes int32  `json:"nodes"`
}

// PinFailure is an image that could not be pinned on a node.
type PinFailure struct {
	Image   string `json:"image"`
	Node    string `json:"node"`
	Message string `json:"message"`
}

// MaxPinFailures bounds status.pins.failures.
const MaxPinFailures = 10

// UnpinFinalizer is on a cache that pins: deleting it first releases its
// pins on the nodes (unpin Jobs), for at most the controller's
// --image-pull-deadline-duration, so that a cache never hangs in deletion.
const UnpinFinalizer = "kubefledged.io/unpin"

// PinUnsupported is the reason of the nodes whose runtime cannot pin.
const PinUnsupported = "PinUnsupported"

// Counts are the (image, node) pairs of an operation, by state.
type Counts struct {
	// Desired pairs: images times the eligible nodes of their list.
	Desired int32 `json:"desired"`
	// Succeeded pairs: pulled (or deleted) by a Job.
	Succeeded int32 `json:"succeeded"`
	// AlreadyPresent pairs needed no Job: the node reports the image.
	AlreadyPresent int32 `json:"alreadyPresent"`
	Failed         int32 `json:"failed"`
	// Skipped pairs are on nodes left out: cordoned, NotReady, or with a
	// taint the list does not tolerate. They are not in Desired.
	Skipped int32 `json:"skipped"`
	// InFlight pairs have a running Job; Waiting pairs wait for one
	// (--max-concurrent-jobs).
	InFlight int32 `json:"inFlight"`
	Waiting  int32 `json:"waiting"`
	// Pinned pairs are held pinned by this cache (status.pins), when it
	// pins: the ones pinned before the latest operation too.
	// +optional
	Pinned int32 `json:"pinned,omitempty"`
}

// SkippedNodes are the nodes left out of an operation for one reason.
type SkippedNodes struct {
	Reason string `json:"reason"`
	Count  int32  `json:"count"`
	// Nodes names at most MaxSkippedNames of them.
	// +optional
	// +listType=atomic
	Nodes []string `json:"nodes,omitempty"`
}

// MaxSkippedNames bounds the node names kept per skip reason.
const MaxSkippedNames = 10

// Reasons a node matched by a list is left out.
const (
	SkipCordoned          = "Cordoned"
	SkipNotReady          = "NotReady"
	SkipTaintNotTolerated = "TaintNotTolerated"
	SkipNotLinux          = "NotLinux"
	// SkipUnsupportedArch: the node's kubernetes.io/arch is one our image
	// holds no binary for (internal/platform), so its Jobs could never start.
	SkipUnsupportedArch = "UnsupportedArch"
	// SkipVirtualNode: a virtual kubelet's node (EKS Fargate, AKS virtual
	// nodes, virtual-kubelet), which keeps no images for later pods.
	SkipVirtualNode = "VirtualNode"
)

// Why a delete left an image on a node (status.kept).
const (
	// KeptReasonInUse: a container on the node that has not exited uses
	// the image; removing it would make that container's restart pull it.
	KeptReasonInUse = "InUse"
	// KeptReasonPinned: the runtime pins the image (its sandbox image), or
	// another cache does.
	KeptReasonPinned = "Pinned"
)

// ReadyReasonNodesSkipped is the reason of a Ready condition that is False
// because nodes the lists select were left out of the pulls (see the Skip
// reasons) and do not report every image; its message names them.
const ReadyReasonNodesSkipped = "NodesSkipped"

// Condition types.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	// ConditionPodsResolved is False while the pods of fromPods or the
	// workloads of fromWorkloads cannot be read: the named images are still
	// cached, and those found before are kept.
	ConditionPodsResolved = "PodsResolved"
	// ConditionPinned is there when the cache pins: True when every image
	// present on a node that can pin is pinned there, False with reason
	// PinFailed when a pin failed (PinUnsupported nodes do not count).
	ConditionPinned = "Pinned"
)

// Reasons of the Pinned condition.
const (
	PinnedReasonPinned    = "Pinned"
	PinnedReasonPinFailed = "PinFailed"
)

// ListPodImages is what the fromPods and fromWorkloads of one list found.
type ListPodImages struct {
	// List is the index of the list in spec.cacheSpec.
	List int32 `json:"list"`
	// Pods counts the pods selected.
	Pods int32 `json:"pods"`
	// Workloads counts the workloads fromWorkloads selected.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`
	// Count is the number of distinct images they run; Images holds at most
	// MaxPodImages of all lists together, the rest are not cached (Omitted).
	Count int32 `json:"count"`
	// +optional
	Omitted int32 `json:"omitted,omitempty"`
	// +optional
	// +listType=atomic
	Images []PodImage `json:"images,omitempty"`
}

// PodImage is one image found in pods or workload templates, and why it is
// cached.
type PodImage struct {
	// Image as the pods or templates name it.
	Image string `json:"image"`
	// Pods counts the pods that run it.
	Pods int32 `json:"pods"`
	// Workloads counts the selected workloads whose template names it.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`
	// UsedBy is one of them: namespace/kind/name of a pod's controller (a
	// ReplicaSet, a StatefulSet, a Job...), namespace/Pod/name of a bare
	// pod, or namespace/kind/name of a workload (namespace/Deployment/web),
	// the least of these names.
	UsedBy string `json:"usedBy"`
}

// MaxPodImages bounds the pod and workload images one cache follows. Each is a status
// entry of about 150 bytes, and the object must fit in etcd's 1.5 MiB beside
// the named images (a spec of up to 256 KiB) and processedSpec's copy of them; 256
// entries are about 40 KiB. A cluster running more distinct images is
// followed by several caches, each selecting part of it.
const MaxPodImages = 256

// `kubectl get ic` answers "are my images there?" first (Ready, as
// results.Ready decides it), then what the latest operation did; `-o wide`
// adds the (image, node) pairs a cache that pins holds pinned, and the Ready
// condition's message, which names what is missing where.
// Wide columns come after Age, as kubectl's own (pods' IP and NODE) do.
//
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Pinned",type=integer,priority=1,JSONPath=`.status.counts.pinned`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// ImageCache keeps a set of images cached on the nodes that match each list.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ic,categories=kube-fledged
type ImageCache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ImageCacheSpec `json:"spec"`
	// +optional
	Status ImageCacheStatus `json:"status,omitempty"`
}

// ImageCacheList is a list of ImageCaches.
//
// +kubebuilder:object:root=true
type ImageCacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageCache `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ImageCache{}, &ImageCacheList{})
}
