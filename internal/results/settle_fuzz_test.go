package results

import (
	"encoding/json"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// FuzzSettle settles a Job from an arbitrary Job status, pods and events,
// decoded from JSON as the informer would hand them over. Pod statuses come
// from kubelets, CRI runtimes and registries, none of which we control, so
// whatever they say: no panic, a finished Job never goes back to pending,
// and a failure always carries a reason someone can act on.
func FuzzSettle(f *testing.F) {
	for _, seed := range []struct{ job, pods, events string }{
		{`{"conditions":[{"type":"Complete","status":"True"}]}`, `[]`, `[]`},
		{`{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]}`,
			`[{"status":{"phase":"Failed","containerStatuses":[{"name":"pull","state":{"terminated":{"exitCode":1,"reason":"Error","message":"x"}}}]}}]`, `[]`},
		{`{"conditions":[{"type":"Failed","status":"True"}]}`,
			`[{"status":{"phase":"Pending","initContainerStatuses":[{"name":"install-helper","state":{"waiting":{"reason":"ImagePullBackOff","message":"no such host"}}}]}}]`,
			`[{"type":"Warning","message":"Failed to pull image"},{"type":"Normal","message":"Pulling"}]`},
		{`{"conditions":[{"type":"FailureTarget","status":"True"},{"type":"SuccessCriteriaMet","status":"False"}]}`,
			`[{"metadata":{"creationTimestamp":"2025-01-01T00:00:00Z"},"status":{"phase":"Running"}},{"metadata":{"creationTimestamp":"2025-01-01T00:00:01Z"},"status":{"reason":"Evicted","message":"node low on memory"}}]`, `null`},
		{`{}`, `[{"spec":{"nodeName":"n1"},"status":{"phase":"Pending","containerStatuses":[{"state":{"waiting":{"reason":"ContainerCreating"}}}]}}]`, `[]`},
		{`{"conditions":[{"type":"Complete","status":"Unknown"},{"type":"Failed","status":"True","reason":"","message":""}]}`,
			`[{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":0}}},{"state":{"terminated":{"exitCode":-1,"message":"   "}}}]}}]`, `[]`},
		{`null`, `null`, `null`},
	} {
		f.Add([]byte(seed.job), []byte(seed.pods), []byte(seed.events))
	}
	f.Fuzz(func(t *testing.T, jobStatus, podsJSON, eventsJSON []byte) {
		j := job()
		if json.Unmarshal(jobStatus, &j.Status) != nil {
			return
		}
		var pods []corev1.Pod
		if json.Unmarshal(podsJSON, &pods) != nil {
			return
		}
		var events []corev1.Event
		if json.Unmarshal(eventsJSON, &events) != nil {
			return
		}

		now := FromJob(j, pods)
		finished := jobFinished(j)
		switch {
		case finished == batchv1.JobComplete && now.State != Succeeded:
			t.Fatalf("a Complete Job settled as %+v", now)
		case finished == batchv1.JobFailed && now.State != Failed:
			t.Fatalf("a Failed Job settled as %+v", now)
		case finished == "" && now.State != Pending:
			t.Fatalf("an unfinished Job settled as %+v", now)
		}
		if now.State == Failed && (now.Reason == "" || now.Message == "") {
			t.Fatalf("failure without reason or message: %+v", now)
		}

		late := AtDeadline(j, pods, events)
		if late.State == Pending {
			t.Fatalf("still pending at the deadline: %+v", late)
		}
		if now.State != Pending && late != now {
			t.Fatalf("the deadline changed a settled outcome: %+v, then %+v", now, late)
		}
		if late.State == Failed && late.Reason == "" {
			t.Fatalf("failure at the deadline without a reason: %+v", late)
		}
		if now.State == Pending && len(late.Message) > MaxMessage {
			t.Fatalf("deadline message of %d bytes, bound is %d", len(late.Message), MaxMessage)
		}
	})
}

// jobFinished is the first True terminal condition, the one FromJob follows.
func jobFinished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type
		}
	}
	return ""
}
