package monitoring

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// A recording holds what the controller's /metrics served during a sandbox
// run, scrape by scrape, as test/e2e/imagecache writes it. It is text, one
// entry a line:
//
//	# kube-fledged scrapes v1        the first line
//	# note <text>                    a remark for readers
//	# namespace <ns>                 the namespace of the run's caches
//	# exported <name> ...            every sample name the controller served
//	# event <unix ms> <name>         something the run did, and when
//	# scrape <unix ms> ok|failed     a scrape; the lines up to the next
//	                                 "#" line change the series it saw:
//	<series> <value>                 a series that appeared or changed value
//	- <series>                       a series that went away
//
// A series a block does not mention kept its value. A failed scrape saw
// nothing; the next one that answers lists every series again. Series are
// written as the exposition format writes them, name{label="value",...}.
// Only deltas are kept so that the file stays small enough to review.
const recordingHeader = "# kube-fledged scrapes v1"

// Recording is a parsed recording.
type Recording struct {
	Namespace string
	// Exported are the sample names the controller served: histograms'
	// _bucket, _sum and _count, not their family names.
	Exported []string
	// Events are the times of what the run did, by name (the first time
	// each was recorded).
	Events  map[string]time.Time
	Scrapes []Scrape
}

// Scrape is one scrape: when, whether it answered, and the series it saw
// then (all of them, not the delta).
type Scrape struct {
	At     time.Time
	OK     bool
	Series map[string]float64
}

// ParseRecording reads a recording.
func ParseRecording(r io.Reader) (*Recording, error) {
	rec := &Recording{Events: map[string]time.Time{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	cur := map[string]float64{}
	var open *Scrape // the scrape whose delta lines follow
	closeScrape := func() {
		if open != nil {
			if open.OK {
				open.Series = maps.Clone(cur)
			}
			rec.Scrapes = append(rec.Scrapes, *open)
			open = nil
		}
	}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != recordingHeader {
				return nil, fmt.Errorf("line 1: %q is not a recording (want %q)", text, recordingHeader)
			}
			continue
		}
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "# ") {
			closeScrape()
			f := strings.Fields(text[2:])
			if len(f) == 0 {
				continue
			}
			switch f[0] {
			case "note":
			case "namespace":
				if len(f) != 2 {
					return nil, fmt.Errorf("line %d: %q", line, text)
				}
				rec.Namespace = f[1]
			case "exported":
				rec.Exported = append(rec.Exported, f[1:]...)
			case "event":
				if len(f) != 3 {
					return nil, fmt.Errorf("line %d: %q", line, text)
				}
				at, err := millis(f[1])
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", line, err)
				}
				if _, seen := rec.Events[f[2]]; !seen {
					rec.Events[f[2]] = at
				}
			case "scrape":
				if len(f) != 3 || (f[2] != "ok" && f[2] != "failed") {
					return nil, fmt.Errorf("line %d: %q", line, text)
				}
				at, err := millis(f[1])
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", line, err)
				}
				if n := len(rec.Scrapes); n > 0 && !at.After(rec.Scrapes[n-1].At) {
					return nil, fmt.Errorf("line %d: scrape at %s is not after the one before", line, at)
				}
				open = &Scrape{At: at, OK: f[2] == "ok"}
				if !open.OK {
					cur = map[string]float64{}
				}
			default:
				return nil, fmt.Errorf("line %d: unknown entry %q", line, f[0])
			}
			continue
		}
		if open == nil || !open.OK {
			return nil, fmt.Errorf("line %d: a series outside an answered scrape", line)
		}
		if gone, ok := strings.CutPrefix(text, "- "); ok {
			if _, had := cur[gone]; !had {
				return nil, fmt.Errorf("line %d: %s went away but was not there", line, gone)
			}
			delete(cur, gone)
			continue
		}
		i := strings.LastIndexByte(text, ' ')
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q has no value", line, text)
		}
		v, err := strconv.ParseFloat(text[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		cur[text[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	closeScrape()
	if len(rec.Scrapes) == 0 {
		return nil, fmt.Errorf("no scrapes")
	}
	sort.Strings(rec.Exported)
	rec.Exported = slices.Compact(rec.Exported)
	return rec, nil
}

func millis(s string) (time.Time, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	return time.UnixMilli(ms), nil
}

// Start and End are the first and last scrape times.
func (r *Recording) Start() time.Time { return r.Scrapes[0].At }
func (r *Recording) End() time.Time   { return r.Scrapes[len(r.Scrapes)-1].At }

// Event is the time of a named event; it fails the caller's expectation
// rather than the program when the run did not record it.
func (r *Recording) Event(name string) (time.Time, error) {
	at, ok := r.Events[name]
	if !ok {
		return time.Time{}, fmt.Errorf("the recording has no event %q", name)
	}
	return at, nil
}

// Load appends the recording to a storage as Prometheus's scrape loop
// would: each series gets the target's labels (a label the series has
// already is kept as exported_<name>, honor_labels being false), "up" is 1
// for an answered scrape and 0 for a failed one, and a series that went
// away, or every series at a failed scrape, gets a staleness marker, so
// that it vanishes from queries at once rather than after the lookback.
func (r *Recording) Load(ctx context.Context, db storage.Appendable, target labels.Labels) error {
	p := parser.NewParser(parser.Options{})
	parsed := map[string]labels.Labels{}
	labelsOf := func(series string) (labels.Labels, error) {
		if ls, ok := parsed[series]; ok {
			return ls, nil
		}
		ls, err := p.ParseMetric(series)
		if err != nil {
			return labels.EmptyLabels(), fmt.Errorf("series %s: %w", series, err)
		}
		b := labels.NewBuilder(ls)
		target.Range(func(l labels.Label) {
			if v := ls.Get(l.Name); v != "" {
				b.Set("exported_"+l.Name, v)
			}
			b.Set(l.Name, l.Value)
		})
		parsed[series] = b.Labels()
		return parsed[series], nil
	}
	upLabels := labels.NewBuilder(target).Set(labels.MetricName, "up").Labels()
	stale := math.Float64frombits(value.StaleNaN)
	var prev map[string]float64
	for _, s := range r.Scrapes {
		app := db.Appender(ctx)
		ts := s.At.UnixMilli()
		up := 0.0
		if s.OK {
			up = 1
		}
		if _, err := app.Append(0, upLabels, ts, up); err != nil {
			return err
		}
		for series := range prev {
			if _, still := s.Series[series]; still {
				continue
			}
			ls, err := labelsOf(series)
			if err != nil {
				return err
			}
			if _, err := app.Append(0, ls, ts, stale); err != nil {
				return err
			}
		}
		for series, v := range s.Series {
			ls, err := labelsOf(series)
			if err != nil {
				return err
			}
			if _, err := app.Append(0, ls, ts, v); err != nil {
				return err
			}
		}
		if err := app.Commit(); err != nil {
			return err
		}
		prev = s.Series
	}
	return nil
}
