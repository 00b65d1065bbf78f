// Package pin holds the rules by which a cache pins its images on a node, so
// that the kubelet's image garbage collection never deletes them, and the
// report the node helpers (pin, unpin, cri-rmi --unpin-owner) hand back to the
// controller. It is pure: the node side (containerdpin) applies what Plan
// decides, and the controller reads what ParseReport returns.
//
// The kubelet skips any image its runtime reports as pinned (CRI
// Image.pinned); containerd >= 1.7 reports an image as pinned when it carries
// RuntimeLabel=RuntimeValue. Several caches may pin the same image, and
// somebody else (the runtime's own sandbox image) may have pinned it before
// us, so each cache records itself in an owner label and we only ever remove
// RuntimeLabel when we set it (SetByUsLabel) and the last owner leaves.
package pin

import (
	"sort"
	"strings"
)

const (
	// RuntimeLabel is the containerd image label its CRI plugin reads as
	// Image.pinned.
	RuntimeLabel = "io.cri-containerd.pinned"
	// RuntimeValue is the only value of RuntimeLabel that pins.
	RuntimeValue = "pinned"
	// OwnerLabelPrefix, followed by a cache's UID, names one cache that pins
	// the image. A UID, not a name: a cache deleted and created again under
	// the same name is another owner.
	OwnerLabelPrefix = "kubefledged.io/pin."
	// OwnerValue is the value of an owner label; only its presence counts.
	OwnerValue = "true"
	// SetByUsLabel says that RuntimeLabel was absent when we pinned, so it is
	// ours to remove. Without it the pin belongs to somebody else.
	SetByUsLabel = "kubefledged.io/pinned"
	// SetByUsValue is the value of SetByUsLabel.
	SetByUsValue = "true"
)

// OwnerLabel is the label that records owner (a cache's UID) as a pinner.
func OwnerLabel(owner string) string { return OwnerLabelPrefix + owner }

// Owners lists the caches that pin an image with these labels, sorted.
func Owners(labels map[string]string) []string {
	var out []string
	for k := range labels {
		if o, ok := strings.CutPrefix(k, OwnerLabelPrefix); ok {
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return out
}

// Pinned says whether the runtime reports an image with these labels as
// pinned, whoever pinned it.
func Pinned(labels map[string]string) bool { return labels[RuntimeLabel] == RuntimeValue }

// Plan returns the label changes that pin (pin=true) or unpin an image for
// owner, given the image's labels now: the labels to set and the label keys
// to remove, both empty when nothing needs to change. A RuntimeLabel with any
// value other than RuntimeValue does not pin, so pinning takes it over as if
// it were absent.
func Plan(labels map[string]string, owner string, pin bool) (set map[string]string, remove []string) {
	if pin {
		return planPin(labels, owner), nil
	}
	return nil, planUnpin(labels, owner)
}

func planPin(labels map[string]string, owner string) map[string]string {
	set := map[string]string{}
	if labels[OwnerLabel(owner)] != OwnerValue {
		set[OwnerLabel(owner)] = OwnerValue
	}
	if !Pinned(labels) {
		set[RuntimeLabel] = RuntimeValue
		set[SetByUsLabel] = SetByUsValue
	}
	return set
}

// planUnpin also drops a pin of ours that no owner holds any more, even when
// owner's own label is already gone: a helper that died between its two
// updates must not leave the image pinned for ever.
func planUnpin(labels map[string]string, owner string) []string {
	var remove []string
	if _, ok := labels[OwnerLabel(owner)]; ok {
		remove = append(remove, OwnerLabel(owner))
	}
	for _, o := range Owners(labels) {
		if o != owner {
			return remove
		}
	}
	if _, ours := labels[SetByUsLabel]; !ours {
		return remove
	}
	if _, ok := labels[RuntimeLabel]; ok {
		remove = append(remove, RuntimeLabel)
	}
	return append(remove, SetByUsLabel)
}
