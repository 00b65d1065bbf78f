package framework

import "time"

// ClusterTimeout bounds a wait on what another process does for a test: the API server,
// kube-controller-manager, the scheduler, kwok, a kubelet, or our controller acting
// through them. On a CI machine of two loaded cores these take many times what they take
// on an idle one, and a deadline of seconds fails a test that was only slow; a deadline
// of minutes is reached only when the awaited thing never happens.
const ClusterTimeout = 5 * time.Minute
