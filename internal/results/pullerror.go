package results

import (
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PullError is what a failed pull's error says about the next attempt.
type PullError int

const (
	// Unknown is an error none of the patterns below recognises. It is
	// waited on like Transient: the original waited up to
	// --image-pull-deadline-duration for every pull, so waiting costs at
	// worst what it always cost, while failing at once a pull that the
	// kubelet's next attempt would have made is the false failure users
	// complained of. A permanent error we do not recognise still fails, at
	// the deadline, with the registry's words.
	Unknown PullError = iota
	// Transient errors heal by themselves: the registry is rate limiting
	// (429), failing (5xx), slow or unreachable for a moment. The kubelet
	// retries them with its back-off.
	Transient
	// Permanent errors cannot heal without a change: the image or tag does
	// not exist, the credentials are wrong or missing, the reference is
	// invalid. Another attempt gets the same answer.
	Permanent
)

func (e PullError) String() string {
	switch e {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return "unknown"
}

// Heals says whether a pull failing with e is worth waiting for.
func (e PullError) Heals() bool { return e != Permanent }

// pullErrors are the waiting reasons by which the kubelet says that a
// container's image could not be pulled, and whether the reason alone
// settles the question: an invalid name or a Never policy with the image
// absent fail every attempt, whatever the message; ErrImagePull and
// ImagePullBackOff carry the runtime's error, which tells.
var pullErrors = map[string]PullError{
	"ErrImagePull":      Unknown,
	"ImagePullBackOff":  Unknown,
	"InvalidImageName":  Permanent,
	"ErrImageNeverPull": Permanent,
}

// ClassifyPull says whether a container waiting with reason and message is
// failing to pull, and if so how: ok is false for any other wait.
func ClassifyPull(reason, message string) (e PullError, ok bool) {
	e, ok = pullErrors[reason]
	if !ok {
		return Unknown, false
	}
	if e == Permanent {
		return Permanent, true
	}
	return ClassifyPullMessage(message), true
}

// statusCode finds the HTTP status a registry answered, in the words of
// containerd ("unexpected status from GET request to …: 503 Service
// Unavailable", "unexpected status code …: 429 Too Many Requests", and
// containerd 2's "pulling from host … failed with status code [manifests
// v1]: 429 Too Many Requests") and of
// CRI-O and Docker ("received unexpected HTTP status: 500 Internal Server
// Error", "status code 502").
var statusCode = regexp.MustCompile(`(?i)(?:unexpected (?:http )?status.*?: |status code(?: \[[^\]]*\])?:? )(\d{3})\b`)

// permanentWords are the registries' and runtimes' words for an answer that
// will not change: containerd's "…: not found" and NotFound code, Docker
// Hub's "pull access denied, repository does not exist or may require
// authorization" and "denied: requested access to the resource is denied"
// (any denial: a registry that refuses today refuses tomorrow),
// the distribution API's MANIFEST_UNKNOWN, NAME_UNKNOWN and UNAUTHORIZED
// codes, an authentication required, and a malformed reference.
var permanentWords = []string{
	"not found",
	"code = notfound",
	"manifest unknown",
	"name unknown",
	"unknown manifest",
	"repository does not exist",
	"repository name not known",
	"denied",
	"unauthorized",
	"authentication required",
	"no basic auth credentials",
	"invalid reference format",
	"invalid image name",
	"code = permissiondenied",
	"code = unauthenticated",
	"insufficient_scope",
	// The image has no build for the node's platform (missingPlatform).
	"no image found in manifest list",
	"no match for platform in manifest",
}

// ReasonPlatformMissing replaces the kubelet's reason of a pull that failed
// because the image holds no build for the node's OS and architecture
// (CRI-O's "no image found in manifest list for architecture …",
// containerd's "no match for platform in manifest"): no registry, credential
// or retry fixes that, and ErrImagePull alone sends the reader to the
// registry.
const ReasonPlatformMissing = "ImagePlatformMissing"

// missingPlatform says whether a pull error is the image's want of a build
// for the node's platform.
func missingPlatform(message string) bool {
	lower := strings.ToLower(message)
	return strings.Contains(lower, "no image found in manifest list") || strings.Contains(lower, "no match for platform in manifest")
}

// transientWords are those of a registry or network that failed for a
// moment: rate limits, server errors, timeouts and connections cut short.
var transientWords = []string{
	"toomanyrequests",
	"too many requests",
	"rate limit",
	"service unavailable",
	"bad gateway",
	"gateway timeout",
	"internal server error",
	"timeout",
	"timed out",
	"deadline exceeded",
	"connection reset",
	"connection refused",
	"broken pipe",
	"eof",
	"tls handshake",
	"temporary failure",
	"try again",
	"code = unavailable",
	"code = resourceexhausted",
	"code = deadlineexceeded",
}

// ClassifyPullMessage classifies the runtime's error of a failed pull, as
// the kubelet writes it into a waiting state or a Failed event. An HTTP
// status, when the message gives one, decides: 408, 429 and 5xx are
// Transient, any other 4xx Permanent. Otherwise the permanent words are
// looked for first, since a message that says "not found" after a retried
// request is still about a missing image; then the transient ones.
// Anything else is Unknown (see there why it is waited on).
func ClassifyPullMessage(message string) PullError {
	if m := statusCode.FindStringSubmatch(message); m != nil {
		code, _ := strconv.Atoi(m[1])
		switch {
		case code == 408 || code == 429 || code >= 500 && code <= 599:
			return Transient
		case code >= 400 && code <= 499:
			return Permanent
		}
	}
	lower := strings.ToLower(message)
	for _, w := range permanentWords {
		if strings.Contains(lower, w) {
			return Permanent
		}
	}
	for _, w := range transientWords {
		if w == "eof" {
			if eof.MatchString(message) {
				return Transient
			}
			continue
		}
		if strings.Contains(lower, w) {
			return Transient
		}
	}
	return Unknown
}

// eof is Go's io.EOF and io.ErrUnexpectedEOF as they end up in a message:
// a connection closed in the middle of an answer.
var eof = regexp.MustCompile(`\b(?:unexpected )?EOF\b`)

// TransientReason is the failure reason of a pull whose registry was still
// failing transiently when the pull deadline came: the kubelet's reason
// (ErrImagePull, ImagePullBackOff) would not tell it from an image that
// does not exist, and the two call for different fixes (wait, or raise
// --image-pull-deadline-duration; against: fix the name or the secret).
const TransientReason = "RegistryKeptFailing"

// transientAtDeadline is the outcome of a pull still failing transiently
// (or unknowably) at the deadline, with the last error the kubelet gave.
func transientAtDeadline(last string) Outcome {
	return Outcome{State: Failed, Expired: true, Reason: TransientReason,
		Message: "the registry kept failing with errors that may heal until the pull deadline; last: " + last}
}

// pullWait settles a container (what names it in messages) that waits with
// w: ok is false when w is no pull error. A permanent error fails at once
// with the kubelet's reason and message, as before; one that may heal
// leaves the container pending until expired. At the deadline, more (the
// Warning events, read only then) joins the message and is classified with
// it: a back-off whose own message names no error can be explained by a
// "not found" event, and then fails with the kubelet's reason as the
// original did; what still may heal fails with TransientReason.
func pullWait(w *corev1.ContainerStateWaiting, what string, expired bool, more []string) (Outcome, bool) {
	if w == nil {
		return Outcome{}, false
	}
	kind, ok := ClassifyPull(w.Reason, w.Message)
	if !ok {
		return Outcome{}, false
	}
	msg := nonEmpty(w.Message, what+" is waiting: "+w.Reason)
	if missingPlatform(msg) {
		return Outcome{State: Failed, Expired: expired, Reason: ReasonPlatformMissing,
			Message: msg + " (the image has no build for this node's OS and architecture)"}, true
	}
	if !expired {
		if !kind.Heals() {
			return Outcome{State: Failed, Reason: w.Reason, Message: msg}, true
		}
		return Outcome{State: Pending}, true
	}
	msg = joinMessages(msg, more)
	if kind, _ = ClassifyPull(w.Reason, msg); !kind.Heals() {
		return Outcome{State: Failed, Expired: true, Reason: w.Reason, Message: msg}, true
	}
	return transientAtDeadline(msg), true
}
