package commands

import (
	"flag"
	"io"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Logging is controller-runtime's standard zap flag set (--zap-log-level,
// --zap-encoder, --zap-devel, --zap-stacktrace-level, --zap-time-encoding),
// which both commands take, as every kubebuilder operator does. Our own
// --zap-log-level took debug, info or error: zap's takes those too.
type Logging struct {
	Zap zap.Options
	// Verbosity is the original's -v (the controller's only): 4 and above
	// log at debug level unless --zap-log-level says otherwise.
	Verbosity int
	// levelSet records an explicit --zap-log-level, which -v must not
	// override.
	levelSet bool
}

// newLogging starts from production settings: JSON, info, stack traces at
// error. Development stays false unless --zap-devel asks, so that a debug
// level is only more lines in the same format: zap's development mode
// would also switch the encoder to console, which breaks whatever parses
// the logs exactly when someone is debugging.
func newLogging() *Logging {
	return &Logging{Zap: zap.Options{Development: false}}
}

// BindFlags binds zap's flags to fs.
func (l *Logging) BindFlags(fs *flag.FlagSet) {
	l.Zap.BindFlags(fs)
}

// bindVerbosity binds the original's -v (the controller keeps it).
func (l *Logging) bindVerbosity(fs *flag.FlagSet) {
	fs.IntVar(&l.Verbosity, "v", 0, "the original's log verbosity; 4 or more logs at debug level (--zap-log-level is preferred)")
}

// parsed notes what the command line set; call it after fs.Parse.
func (l *Logging) parsed(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "zap-log-level" {
			l.levelSet = true
		}
	})
}

// Setup sets controller-runtime's logger, writing to w.
func (l *Logging) Setup(w io.Writer) {
	ctrl.SetLogger(zap.New(l.options(w)...))
}

func (l *Logging) options(w io.Writer) []zap.Opts {
	o := l.Zap
	o.DestWriter = w
	if !l.levelSet && l.Verbosity >= 4 {
		o.Level = zapcore.DebugLevel
	}
	return []zap.Opts{zap.UseFlagOptions(&o)}
}
