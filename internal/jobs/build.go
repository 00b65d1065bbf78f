package jobs

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
)

// Kind says whether a Job pulls an image onto a node, deletes it from one,
// or pins or unpins images there.
type Kind string

const (
	Pull   Kind = "pull"
	Delete Kind = "delete"
	// Pin and Unpin Jobs label images in the node's runtime so that the
	// kubelet's image garbage collection keeps them (internal/pin); one
	// Job covers every image of a cache on one node.
	Pin   Kind = "pin"
	Unpin Kind = "unpin"
)

// onRuntime says whether a Job of kind talks to the node's runtime through
// its socket: such a Job needs a hostPath and root, so it runs where and as
// whom the delete Jobs run, never as a pull Job, which stays unprivileged.
func (k Kind) onRuntime() bool { return k == Delete || k == Pin || k == Unpin }

// Node is what a Job needs to know of its target node.
type Node struct {
	Name string
	// Runtime is status.nodeInfo.containerRuntimeVersion, e.g. containerd://1.7.2.
	Runtime string
	// Parallel is how many of one pod's image pulls the node runs at once
	// (pacing.ParallelPulls); 0 counts as 1, what the kubelet does.
	Parallel int
}

// Work is one (image, node) action of an operation.
type Work struct {
	Kind  Kind
	Image string // as written in the spec; it keys the failures map
	Ref   images.Ref
	Node  Node
	// Tolerations of the image's list; none means tolerate every taint.
	Tolerations []corev1.Toleration
}

// Key identifies a work item within an operation.
func (w Work) Key() string { return string(w.Kind) + "|" + w.Ref.String() + "|" + w.Node.Name }

// Options are the controller-wide settings that shape every Job.
type Options struct {
	// HelperImage is our own image: the pull Job's init container and the
	// delete Job's CRI client.
	HelperImage string
	// PullPolicy is the flag --image-pull-policy: IfNotPresent or Always.
	PullPolicy corev1.PullPolicy
	// ServiceAccountName is the pull Jobs' ServiceAccount, and the delete
	// Jobs' when DeleteServiceAccountName is empty.
	ServiceAccountName string
	PriorityClassName  string
	DeleteHostNetwork  bool
	// DeleteNamespace is where the delete Jobs run: the controller's own
	// namespace. A delete needs the runtime socket (a hostPath) and root,
	// which a cache's namespace enforcing Pod Security baseline or
	// restricted refuses; the controller's namespace is labelled
	// privileged. Empty runs them in the cache's namespace, as the
	// original did.
	DeleteNamespace string
	// DeleteServiceAccountName is the delete Jobs' ServiceAccount, in
	// DeleteNamespace: the one OpenShift's privileged SCC is granted to,
	// and nothing else; empty is that namespace's default, or, with no
	// DeleteNamespace, ServiceAccountName. Its token is never mounted.
	DeleteServiceAccountName string
	// CRISocketPath overrides the runtime's default socket on every node.
	CRISocketPath string
	// ActiveDeadline bounds a Job's life in the cluster, retained or not.
	ActiveDeadline int64
	// PullTolerations are added to the tolerations of a list that has its
	// own: the startup taint's, so that a list that tolerates only its
	// dedicated nodes' taints still reaches a node held for its images.
	PullTolerations []corev1.Toleration
	// Resources override the containers' default requests and limits.
	Resources Resources
}

// Owner is the cache and operation a Job belongs to, and what of the
// cache's namespace shapes the Job.
type Owner struct {
	Cache     *v1alpha2.ImageCache
	Operation string
	// PullUser is the UID the pull containers run as (PullUser reads it
	// from the namespace); 0 means DefaultPullUser. It comes in here, not
	// through Options, because it differs from namespace to namespace.
	PullUser int64
	// Unpin makes its delete Jobs release the cache's pin of the image
	// before removing it (cri-rmi --unpin-owner): a cache that pins, or
	// pinned, would otherwise leave its owner label behind, and the image
	// pinned for good by a cache that no longer wants it.
	Unpin bool
}

// HelperBinary is where our binary lives in our own image.
const HelperBinary = "/kubefledged"

const (
	binVolume = "kubefledged-bin"
	binDir    = "/kubefledged-bin"
	criVolume = "cri-socket"
	criMount  = "/run/kubefledged/cri.sock"
)

// Name is the Job's fixed name: the cache name cut to fit, and a hash of the
// operation and work. Fixed names make creation idempotent, so a retried
// create can never duplicate a Job.
func Name(cacheName, operation string, w Work) string {
	h := shortHash(operation, w.Key())
	// Job names become pod label values: 63 characters at most, and the
	// Job controller appends a 5-character pod suffix to the name.
	prefix := cacheName
	if max := 63 - len(h) - 1 - 6; len(prefix) > max {
		prefix = prefix[:max]
	}
	prefix = strings.TrimRight(prefix, "-.")
	return prefix + "-" + h
}

// Namespace is where a Job of kind for cache runs: a delete, pin or unpin
// Job in opts.DeleteNamespace when that is set, every other Job in the
// cache's namespace.
func Namespace(cache *v1alpha2.ImageCache, kind Kind, opts Options) string {
	if kind.onRuntime() && opts.DeleteNamespace != "" {
		return opts.DeleteNamespace
	}
	return cache.Namespace
}

// Build returns the Job for one work item.
func Build(o Owner, w Work, opts Options) (*batchv1.Job, error) {
	var pod corev1.PodSpec
	switch w.Kind {
	case Pull:
		pod = pullPod([]Work{w}, opts, o.pullUser(), false)
	case Delete:
		p, err := deletePod(o, w, opts)
		if err != nil {
			return nil, err
		}
		pod = p
	default:
		return nil, fmt.Errorf("unknown job kind %q", w.Kind)
	}
	ann := map[string]string{
		AnnotationImage:   w.Image,
		AnnotationNode:    w.Node.Name,
		AnnotationRuntime: w.Node.Runtime,
	}
	return wrap(o, w.Kind, w.Node.Name, w.Tolerations, Name(o.Cache.Name, o.Operation, w), ann, pod, opts), nil
}

// wrap makes the Job around a pod spec: what every Job of ours shares,
// whatever it does and however many images it pulls.
func wrap(o Owner, kind Kind, node string, tolerations []corev1.Toleration, name string, ann map[string]string, pod corev1.PodSpec, opts Options) *batchv1.Job {
	cache := o.Cache
	pod.RestartPolicy = corev1.RestartPolicyNever
	// Both kinds run our helper image, which may sit in a private mirror
	// that only the cache's pull secrets open.
	pod.ImagePullSecrets = cache.Spec.ImagePullSecrets
	pod.Affinity = pinTo(node)
	// Node choice is the controller's, made before a Job exists: without
	// tolerations of its own a list's Jobs tolerate every taint, as the
	// original's did; with them, exactly those.
	pod.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if len(tolerations) > 0 {
		pod.Tolerations = append([]corev1.Toleration{}, tolerations...)
		if kind == Pull {
			pod.Tolerations = append(pod.Tolerations, opts.PullTolerations...)
		}
	}
	pod.PriorityClassName = opts.PriorityClassName
	switch {
	case kind.onRuntime():
		// The CRI client never calls the API server.
		// In the controller's namespace the pull Jobs' ServiceAccount,
		// which lives in the caches' namespaces, means nothing.
		pod.ServiceAccountName = opts.DeleteServiceAccountName
		if opts.DeleteNamespace == "" && pod.ServiceAccountName == "" {
			pod.ServiceAccountName = opts.ServiceAccountName
		}
		pod.AutomountServiceAccountToken = ptr.To(false)
	case opts.ServiceAccountName != "":
		pod.ServiceAccountName = opts.ServiceAccountName
	default:
		pod.AutomountServiceAccountToken = ptr.To(false)
	}

	lbls := map[string]string{
		LabelApp:        LabelAppValue,
		LabelManager:    LabelManagerValue,
		LabelImageCache: CacheLabelValue(cache.Name),
		LabelController: LabelControllerVal,
		LabelCacheUID:   string(cache.UID),
		LabelOperation:  o.Operation,
		LabelKind:       string(kind),
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: Namespace(cache, kind, opts), Labels: lbls, Annotations: ann}
	if meta.Namespace == cache.Namespace {
		meta.OwnerReferences = []metav1.OwnerReference{{
			APIVersion:         v1alpha2.GroupVersion.String(),
			Kind:               "ImageCache",
			Name:               cache.Name,
			UID:                cache.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}}
	} else {
		// An owner reference cannot cross namespaces: the controller
		// maps the Job back to its cache by this annotation, and
		// deletes it when the cache goes (selecting it by the labels).
		// Its pod gets neither the cache's pull secrets, which live in
		// the cache's namespace, but its ServiceAccount's.
		pod.ImagePullSecrets = nil
		meta.Annotations[AnnotationCache] = cache.Namespace + "/" + cache.Name
		lbls[LabelCacheNamespace] = cache.Namespace
	}
	return &batchv1.Job{
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(opts.ActiveDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyMap(lbls), Annotations: copyMap(ann)},
				Spec:       pod,
			},
		},
	}
}

// pullPod runs each target image with our tiny helper as its command, so any
// image, even one with no shell or no binaries at all, can be "run" and is
// thereby pulled onto the node. Its containers run side by side: the
// kubelet pulls their images independently, and one that cannot be pulled
// leaves the others be.
func pullPod(ws []Work, opts Options, user int64, perNode bool) corev1.PodSpec {
	containers := make([]corev1.Container, len(ws))
	for k, w := range ws {
		policy := corev1.PullIfNotPresent
		if opts.PullPolicy == corev1.PullAlways || w.Ref.Floating() {
			policy = corev1.PullAlways
		}
		name, res := PullContainer, opts.Resources.apply(smallResources())
		if perNode {
			name, res = ContainerName(k), opts.Resources.apply(sharedResources())
		}
		containers[k] = corev1.Container{
			Name:                     name,
			Image:                    w.Image,
			ImagePullPolicy:          policy,
			Command:                  []string{binDir + "/kubefledged", "exit"},
			VolumeMounts:             []corev1.VolumeMount{{Name: binVolume, MountPath: binDir, ReadOnly: true}},
			SecurityContext:          restricted(user),
			Resources:                res,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}
	}
	return corev1.PodSpec{
		Volumes: []corev1.Volume{{
			Name:         binVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("256Mi"))}},
		}},
		InitContainers: []corev1.Container{{
			Name:            "install-helper",
			Image:           opts.HelperImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{HelperBinary, "copy-self", "--to=" + binDir + "/kubefledged"},
			VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: binDir}},
			SecurityContext: restricted(user),
			Resources:       opts.Resources.apply(smallResources()),
		}},
		Containers: containers,
	}
}

// deletePod runs our CRI client's cri-rmi against the node's runtime.
func deletePod(o Owner, w Work, opts Options) (corev1.PodSpec, error) {
	args := []string{"cri-rmi", "--image=" + w.Image}
	// Only a runtime that can pin holds our pins; another has no
	// containerd images API to unpin with.
	if o.Unpin && CanPin(w.Node.Runtime) {
		args = append(args, "--unpin-owner="+string(o.Cache.UID))
	}
	return runtimePod(w.Node, opts, "delete", args)
}

// runtimePod runs one of our helpers against the node's runtime socket, with
// --endpoint pointing at it. It needs root only to open the socket; it
// keeps no capabilities.
func runtimePod(node Node, opts Options, container string, args []string) (corev1.PodSpec, error) {
	socket := opts.CRISocketPath
	if socket == "" {
		s, err := DefaultSocket(node.Runtime)
		if err != nil {
			return corev1.PodSpec{}, err
		}
		socket = s
	}
	sc := restricted(0)
	sc.RunAsNonRoot = ptr.To(false)
	// Under SELinux enforcing (OpenShift, RHEL nodes) a container's own
	// type may not connect to the runtime's socket; spc_t, which node
	// tooling runs as, may. A node without SELinux ignores the option.
	sc.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
	return corev1.PodSpec{
		HostNetwork: opts.DeleteHostNetwork,
		Volumes: []corev1.Volume{{
			Name: criVolume,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: socket, Type: ptr.To(corev1.HostPathSocket),
			}},
		}},
		Containers: []corev1.Container{{
			Name:                     container,
			Image:                    opts.HelperImage,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			Command:                  append([]string{HelperBinary, args[0], "--endpoint=unix://" + criMount}, args[1:]...),
			VolumeMounts:             []corev1.VolumeMount{{Name: criVolume, MountPath: criMount}},
			SecurityContext:          sc,
			Resources:                opts.Resources.apply(smallResources()),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}, nil
}

// Default runtime sockets. Docker is reached through cri-dockerd, the only
// CRI endpoint a Docker node has since dockershim was removed.
const (
	SocketContainerd = "/run/containerd/containerd.sock"
	SocketCRIO       = "/var/run/crio/crio.sock"
	SocketCRIDockerd = "/var/run/cri-dockerd.sock"
)

// DefaultSocket picks the CRI socket from a node's containerRuntimeVersion.
func DefaultSocket(runtime string) (string, error) {
	scheme, _, _ := strings.Cut(runtime, "://")
	switch scheme {
	case "containerd":
		return SocketContainerd, nil
	case "cri-o":
		return SocketCRIO, nil
	case "docker":
		return SocketCRIDockerd, nil
	}
	return "", fmt.Errorf("container runtime %q is not supported: known are containerd, cri-o and docker (cri-dockerd); set --cri-socket-path to use another CRI socket", runtime)
}

// pinTo pins a pod to one node by name rather than by the hostname label,
// which some clusters do not set or set to something else.
func pinTo(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}},
			}},
		},
	}}
}

// pullUser is the UID of the pull containers, DefaultPullUser unless the
// namespace gave one.
func (o Owner) pullUser() int64 {
	if o.PullUser > 0 {
		return o.PullUser
	}
	return DefaultPullUser
}

// restricted is the security context of Pod Security's restricted level,
// run as user: a UID is always named, since the images pulled are anyone's
// and may say USER root.
func restricted(user int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(user),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
