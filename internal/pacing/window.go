package pacing

import "time"

// Window keeps the Jobs in flight to what the cluster's Job controller
// keeps up with, below the --max-concurrent-jobs cap.
//
// The Job controller is the narrow part of every pull: on stock settings it
// syncs 5 Jobs at a time and writes at 20 requests a second, so it runs
// about four short Jobs a second however many are created. Jobs created
// beyond that wait in its queue, and so does every Job created after them:
// a small cache created while a large one held the whole cap waited 20 s
// there for a pull that takes 2 s alone (benchmark scenario 10). The queue
// shows in how long the controller takes to start a Job it was given (to
// set its status.startTime), so the window is sized on that delay, as a
// delay-based congestion window is: it grows while Jobs start within
// half the target, grows slowly up to the target, and shrinks by 30% when a
// Job takes longer to start, or is still unstarted at twice the target, at
// most once per queue's worth of time. Jobs already running take no queue time;
// the large cache keeps the Job controller busy and loses nothing, and a
// newcomer's Jobs start within about the target.
//
// It is not safe for concurrent use: the Limiter holds it under its lock.
type Window struct {
	max, floor int
	target     time.Duration
	size       float64
	// holdUntil is when the last cut has shown: the Jobs queued before it
	// start late, and their delays say nothing new until then.
	holdUntil time.Time
	unstarted map[string]time.Time
}

// windowFloor is the least the window shrinks to: Jobs that run long (a
// slow registry) hold their slots, and a window of a few would leave the
// cluster idle behind them when the Job controller was only briefly slow.
const windowFloor = 10

// cut is how much of the window a sign of queueing leaves.
const cut = 0.7

// NewWindow returns a window below max (0: no cap) on a start-delay target;
// target 0 turns it off: Limit is then always max.
func NewWindow(max int, target time.Duration) *Window {
	w := &Window{max: max, target: target, unstarted: map[string]time.Time{}}
	w.floor = windowFloor
	if max > 0 {
		w.floor = min(w.floor, max)
	}
	w.size = float64(w.floor)
	return w
}

// Limit is how many slots may be held now; 0 means no cap.
func (w *Window) Limit() int {
	if w.target <= 0 {
		return w.max
	}
	return int(w.size)
}

// Sent notes that Job job was created at now.
func (w *Window) Sent(job string, now time.Time) {
	if w.target > 0 {
		w.unstarted[job] = now
	}
}

// Gone forgets a Job that went without being seen to start.
func (w *Window) Gone(job string) { delete(w.unstarted, job) }

// Started notes that Job job was seen started at now (its status.startTime
// set, which the Job controller does at its first sync of the Job), and
// sizes the window on the delay since it was sent. Both ends are this
// controller's clock, read when the create returned and when the Job's
// event arrived (not when a reconcile got to it): the server's timestamps
// would do too, but they count whole seconds. It says whether the window
// grew.
func (w *Window) Started(job string, now time.Time) bool {
	sent, ok := w.unstarted[job]
	if !ok {
		return false
	}
	delete(w.unstarted, job)
	delay := now.Sub(sent)
	if delay > w.target {
		w.shrink(now, delay)
		return false
	}
	before := w.Limit()
	if delay <= w.target/2 {
		w.size++
	} else {
		w.size += 1 / w.size
	}
	if w.max > 0 {
		w.size = min(w.size, float64(w.max))
	}
	return w.Limit() > before
}

// Overdue shrinks the window when a Job is still unstarted at now twice
// the target after it was sent: a Job controller that stopped, or fell far
// behind, says nothing through the Jobs it has not started. Twice, since
// a start seen late in a busy controller is not the Job controller's lag.
func (w *Window) Overdue(now time.Time) {
	for _, sent := range w.unstarted {
		if d := now.Sub(sent); d > 2*w.target {
			w.shrink(now, d)
			return
		}
	}
}

// shrink cuts the window once per queue's worth of time: a delay d seen at
// now means the Jobs created up to d ago are still queued, and they will
// start late after a cut too.
func (w *Window) shrink(now time.Time, d time.Duration) {
	if now.Before(w.holdUntil) {
		return
	}
	w.size = max(w.size*cut, float64(w.floor))
	w.holdUntil = now.Add(d)
}
