package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
)

// unlockingGetter frees releases left pending by an operator that died in
// the middle of a Helm action. Helm records pending-install, -upgrade or
// -rollback before it applies anything and refuses every later action on a
// release in that state ("another operation is in progress"); helm-operator-
// plugins has no way out, so a SIGKILL at the wrong moment froze the
// KubeFledged resource for good. When a reconcile asks for its action client
// no action on that release can be running: this process runs one reconcile
// per resource at a time and leader election keeps other replicas idle. The
// pending revision is therefore dead, and marking it failed is what an admin
// would do by hand: the next upgrade applies the spec again, over whatever
// part of the dead action got through. Nothing is uninstalled.
type unlockingGetter struct {
	configs helmclient.ActionConfigGetter
	clients helmclient.ActionClientGetter
	log     logr.Logger
}

func newUnlockingGetter(configs helmclient.ActionConfigGetter, log logr.Logger) (*unlockingGetter, error) {
	clients, err := helmclient.NewActionClientGetter(configs)
	if err != nil {
		return nil, err
	}
	return &unlockingGetter{configs: configs, clients: clients, log: log}, nil
}

func (g *unlockingGetter) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	cfg, err := g.configs.ActionConfigFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	if err := unlockRelease(cfg.Releases, obj.GetName(), g.log); err != nil {
		return nil, fmt.Errorf("release %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return g.clients.ActionClientFor(ctx, obj)
}

// releases is the part of Helm's storage that unlocking uses.
type releases interface {
	Last(name string) (*release.Release, error)
	Update(rls *release.Release) error
}

// unlockRelease marks the latest revision of name failed when it is pending.
func unlockRelease(s releases, name string, log logr.Logger) error {
	last, err := s.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if last.Info == nil || !last.Info.Status.IsPending() {
		return nil
	}
	was := last.Info.Status
	last.SetStatus(release.StatusFailed, fmt.Sprintf("the operator stopped during this %s; marked failed on restart so that the release can be upgraded again", was))
	if err := s.Update(last); err != nil {
		return fmt.Errorf("marking the dead %s revision %d failed: %w", was, last.Version, err)
	}
	log.Info("released a revision left pending by a stopped operator", "release", name, "revision", last.Version, "was", was)
	return nil
}
