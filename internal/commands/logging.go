package commands

import (
	"io"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// setupLogging sets controller-runtime's logger: --log-level=debug or -v 4
// and above give the development encoder, error drops all below errors.
func setupLogging(level string, verbosity int, w io.Writer) {
	opts := zap.Options{Development: false, DestWriter: w}
	switch {
	case level == "debug" || verbosity >= 4:
		opts.Development = true
	}
	l := zap.New(zap.UseFlagOptions(&opts))
	if level == "error" {
		l = zap.New(zap.UseFlagOptions(&opts), zap.Level(zapcore.ErrorLevel))
	}
	ctrl.SetLogger(l)
}
