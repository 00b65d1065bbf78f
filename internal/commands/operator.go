package commands

import (
	"io"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/operator"
)

// runOperator runs the Helm operator: one helm-operator-plugins reconciler per
// entry of watches.yaml, which renders the chart from each KubeFledged CR.
func runOperator(args []string, stdout, stderr io.Writer) error {
	var o operator.Options
	fs := cli.NewFlagSet("operator")
	o.BindFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	logging := newLogging()
	logging.BindFlags(fs)
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return err
	}
	logging.parsed(fs)
	logging.Setup(stderr)
	cfg, err := restConfig(*kubeconfig, "")
	if err != nil {
		return err
	}
	metrics.RegisterBuildInfo(Version, Revision)
	return operator.Run(ctrl.SetupSignalHandler(), cfg, o)
}
