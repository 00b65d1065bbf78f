package webhook

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubefledged/kube-fledged/internal/webhook/certs"
)

// Setup registers the webhook, the certificate keeper (mode self) and the
// health and readiness checks named "webhook" with mgr. mgr must have been
// built with o.Server() as its WebhookServer.
func Setup(mgr ctrl.Manager, o Options) error {
	if !o.Enable {
		return nil
	}
	if err := o.Validate(); err != nil {
		return err
	}
	srv, ok := mgr.GetWebhookServer().(*Server)
	if !ok {
		return errors.New("webhook: the manager's WebhookServer must come from webhook.Options.Server()")
	}
	srv.Register(Path, NewWebhook())
	certs.RegisterExpiry(o.CertDir)

	if o.CertManagement == CertSelf {
		cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return fmt.Errorf("webhook certificate keeper: %w", err)
		}
		keeper, err := certs.New(cs, certs.Config{
			Policy: certs.Policy{
				Name:         o.ServiceName,
				Hosts:        o.Hosts(),
				Validity:     o.CertValidity,
				RotateBefore: o.RotateBefore,
			},
			Namespace:         o.namespace(),
			SecretName:        o.SecretName,
			ConfigurationName: o.ConfigurationName,
			CertDir:           o.CertDir,
			Log:               mgr.GetLogger().WithName("webhook-certificate"),
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(keeper); err != nil {
			return err
		}
		bundle := keeper.Bundle
		srv.trust.Store(&bundle)
	}

	if err := mgr.AddHealthzCheck("webhook", srv.liveness); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook", srv.readiness)
}
