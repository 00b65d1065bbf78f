package framework

import (
	"os"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

var logFile struct {
	once sync.Once
	err  error
}

// LogToFile sends controller-runtime's log (the controller's and the operator's, which
// the suites run in-process) to a new file at path, beside the sandbox's own logs: in the
// test's output it would bury the failure. Only the first call of a test binary sets it,
// and later ones return its error: controller-runtime takes one logger per process, and a
// component that started holds on to it.
func LogToFile(path string) error {
	logFile.once.Do(func() {
		f, err := os.Create(path)
		if err != nil {
			logFile.err = err
			return
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	})
	return logFile.err
}
