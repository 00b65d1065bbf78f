package operator

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	helmmgr "github.com/operator-framework/helm-operator-plugins/pkg/manager"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/values"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
)

// Run starts the operator and blocks until ctx ends or the manager fails.
// It returns nil after a clean shutdown. Call it once per process:
// controller-runtime refuses a second controller with the same name, and the
// logger (ctrl.SetLogger) is the caller's to set.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	log := ctrl.Log.WithName("operator")

	ws, err := LoadWatches(o.WatchesFile)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mopts := manager.Options{Scheme: scheme}
	o.manager().Apply(&mopts)
	// WATCH_NAMESPACE, set by OLM from the OperatorGroup, narrows the cache;
	// the operator's own namespace, where the KubeFledged it installs from
	// lives, is always in it (an OperatorGroup may target another).
	helmmgr.ConfigureWatchNamespaces(&mopts, log)
	if len(mopts.Cache.DefaultNamespaces) > 0 {
		mopts.Cache.DefaultNamespaces[o.Namespace] = cache.Config{}
	}

	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	registerReleases(mgr.GetCache())

	configs, err := helmclient.NewActionConfigGetter(mgr.GetConfig(), mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("creating the Helm action config getter: %w", err)
	}
	clients, err := newUnlockingGetter(configs, log)
	if err != nil {
		return fmt.Errorf("creating the Helm action client getter: %w", err)
	}
	for _, w := range ws {
		r, err := newReconciler(w, o, clients, mgr.GetAPIReader())
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		log.Info("watching", "gvk", w.GroupVersionKind, "chart", w.ChartPath,
			"dependentWatches", *w.WatchDependentResources, "overrides", keys(w.OverrideValues))
	}

	return mgr.Start(ctx)
}

func newReconciler(w watches.Watch, o Options, clients helmclient.ActionClientGetter, reader client.Reader) (*reconciler.Reconciler, error) {
	maxConcurrent := o.MaxConcurrentReconciles
	if w.MaxConcurrentReconciles != nil {
		maxConcurrent = *w.MaxConcurrentReconciles
	}
	period := o.ReconcilePeriod
	if w.ReconcilePeriod != nil {
		period = w.ReconcilePeriod.Duration
	}
	aliases, err := Aliases(w.Chart)
	if err != nil {
		return nil, err
	}
	opts := []reconciler.Option{
		reconciler.WithActionClientGetter(clients),
		reconciler.WithChart(*withoutCRDs(w.Chart)),
		reconciler.WithGroupVersionKind(w.GroupVersionKind),
		reconciler.WithOverrideValues(w.OverrideValues),
		reconciler.WithSelector(*w.Selector),
		// watchDependentResources says whether to watch; the option says
		// whether to skip (helm-operator-plugins' own run command passes it
		// uninverted).
		reconciler.SkipDependentWatches(!*w.WatchDependentResources),
		reconciler.WithMaxConcurrentReconciles(maxConcurrent),
		reconciler.WithReconcilePeriod(period),
		reconciler.WithMaxReleaseHistory(o.MaxReleaseHistory),
		reconciler.WithInstallAnnotations(annotation.DefaultInstallAnnotations...),
		reconciler.WithUpgradeAnnotations(annotation.DefaultUpgradeAnnotations...),
		reconciler.WithUninstallAnnotations(annotation.DefaultUninstallAnnotations...),
	}
	var translator values.Translator = values.TranslatorFunc(func(_ context.Context, obj *unstructured.Unstructured) (chartutil.Values, error) {
		return specOf(obj)
	})
	if len(aliases) > 0 {
		translator = NewTranslator(aliases)
	}
	opts = append(opts, reconciler.WithValueTranslator(
		ownNamespace(o.Namespace, oneInstall(lister(reader, w.GroupVersionKind, o.Namespace), translator))))
	return reconciler.New(opts...)
}

// withoutCRDs returns the chart minus its crds/ directory. The operator's
// bundle owns the CRDs (OLM installs and upgrades them), and Helm would try to
// create them on every install, which needs rights over CRDs that an operator
// should not hold: without them the install fails as Forbidden even when the
// CRD exists. `helm install` of the chart itself still carries them.
func withoutCRDs(c *chart.Chart) *chart.Chart {
	out := *c
	out.Files = nil
	for _, f := range c.Files {
		if !strings.HasPrefix(f.Name, "crds/") {
			out.Files = append(out.Files, f)
		}
	}
	return &out
}

// LoadWatches reads a watches file with two changes from
// helm-operator-plugins' own loading:
//
//   - a relative chart path is taken relative to the watches file, not to
//     the working directory, so tests and local runs need no chdir;
//   - an override whose value expands to nothing is dropped. Overrides take
//     images from RELATED_IMAGE_* variables, which OLM sets; outside OLM they
//     are unset, and an empty override would blank the chart's value (and
//     raise a ValueOverridden warning on every release).
func LoadWatches(path string) ([]watches.Watch, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches file: %w", err)
	}
	var entries []map[string]interface{}
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("watches file %s: %w", path, err)
	}
	base := filepath.Dir(path)
	for _, e := range entries {
		if c, ok := e["chart"].(string); ok && c != "" && !filepath.IsAbs(c) {
			e["chart"] = filepath.Join(base, c)
		}
	}
	rewritten, err := yaml.Marshal(entries)
	if err != nil {
		return nil, err
	}
	ws, err := watches.LoadReader(bytes.NewReader(rewritten))
	if err != nil {
		return nil, fmt.Errorf("watches file %s: %w", path, err)
	}
	for i := range ws {
		for k, v := range ws[i].OverrideValues {
			if v == "" {
				delete(ws[i].OverrideValues, k)
			}
		}
	}
	return ws, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
