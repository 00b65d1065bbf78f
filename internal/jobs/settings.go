package jobs

import (
	"fmt"
	"strings"
)

// The two settings below travel from the chart's values through the
// controller's flags to the reconciler under one name and one type each, and
// the zero value of each is its flag's default: a Config or an options struct
// left empty behaves as an install that did not set them.

// Retention is --job-retention-policy (the chart's jobRetentionPolicy): what
// becomes of an operation's Jobs once they are settled.
type Retention int

const (
	// RetainNone, "delete" and the default, deletes each Job, with its pods,
	// as soon as it is settled: what runs stays within the caps and a large
	// operation leaves no mass deletion behind it.
	RetainNone Retention = iota
	// Retain, "retain", keeps every Job of an operation, labelled with its
	// result, for the user to read until its (image, node) pair, or its node
	// for a node Job, runs again.
	Retain
)

var retentionWords = []string{RetainNone: "delete", Retain: "retain"}

// ParseRetention reads a --job-retention-policy value, in any case.
func ParseRetention(s string) (Retention, error) { return parseWord[Retention](s, retentionWords) }

// String is the flag's word for r.
func (r Retention) String() string { return word(r, "Retention", retentionWords) }

// Granularity is --pull-job-granularity (the chart's pullJobGranularity):
// what one pull Job covers. Delete Jobs are one per (image, node) at either.
type Granularity int

const (
	// PerNode, "node" and the default, pulls every image of a node's work
	// in one Job, one container per image (at most MaxContainers): a Job and
	// a pod per node, not per (image, node), is what a stock
	// kube-controller-manager keeps up with.
	PerNode Granularity = iota
	// PerImage, "image", is one Job per (image, node), as the original made
	// them.
	PerImage
)

var granularityWords = []string{PerNode: "node", PerImage: "image"}

// ParseGranularity reads a --pull-job-granularity value, in any case.
func ParseGranularity(s string) (Granularity, error) {
	return parseWord[Granularity](s, granularityWords)
}

// String is the flag's word for g.
func (g Granularity) String() string { return word(g, "Granularity", granularityWords) }

// parseWord returns the index of the word s names, with the words the
// controller has always refused an unknown flag value with.
func parseWord[T ~int](s string, words []string) (T, error) {
	for i, w := range words {
		if strings.EqualFold(w, strings.TrimSpace(s)) {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not allowed: use one of %s", s, strings.Join(words, ", "))
}

// word is the word of v, or type(v) for a value no constant names.
func word[T ~int](v T, typ string, words []string) string {
	if v < 0 || int(v) >= len(words) {
		return fmt.Sprintf("%s(%d)", typ, int(v))
	}
	return words[v]
}
