// Package webhook serves the validating admission webhook for ImageCache and
// keeps its certificate. The rules live in webhook/validation and the
// certificate logic in webhook/certs; this package wires them into a
// controller-runtime manager on every replica, leader or not.
package webhook

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/pki"
)

// Path is where the webhook is served; the chart's configuration points here.
const Path = "/validate-kubefledged-io-v1alpha2-imagecache"

// Certificate management modes.
const (
	// CertSelf keeps a CA and serving certificate in a Secret, with no
	// software besides the controller.
	CertSelf = "self"
	// CertExternal serves whatever is in CertDir: cert-manager fills it and
	// its CA injector fills the configuration's caBundle.
	CertExternal = "external"
)

// NamespaceEnv names the environment variable holding the controller's
// namespace (the chart sets it from the downward API), as in the original.
const NamespaceEnv = "KUBEFLEDGED_NAMESPACE"

// Options configure the webhook and its certificate.
type Options struct {
	Enable         bool
	Port           int
	CertDir        string
	CertManagement string // CertSelf or CertExternal
	// SecretName, ServiceName and ConfigurationName name the Secret shared
	// by the replicas, the Service the apiserver calls, and the
	// ValidatingWebhookConfiguration that gets the CA bundle (mode self).
	SecretName, ServiceName, ConfigurationName string
	Namespace                                  string
	// ExtraHosts are extra names or IPs for the serving certificate, e.g.
	// 127.0.0.1 when the apiserver calls a URL on loopback.
	ExtraHosts []string
	// CertValidity is the lifetime of each CA and serving certificate;
	// RotateBefore starts a rotation that long before expiry.
	CertValidity, RotateBefore time.Duration
}

// Defaults: a year of validity with a month's margin means a rotation is
// rare, and a controller down for weeks still comes back to a valid one.
const (
	DefaultPort              = 9443
	DefaultCertDir           = "/tmp/k8s-webhook-server/serving-certs"
	DefaultSecretName        = "kubefledged-webhook-cert"
	DefaultServiceName       = "kubefledged-webhook"
	DefaultConfigurationName = "validate-image-cache.kubefledged.io"
	DefaultCertValidity      = 365 * 24 * time.Hour
	DefaultRotateBefore      = 30 * 24 * time.Hour
)

// BindFlags sets the defaults and registers the flags. Values are checked as
// they are parsed, so a typo stops the controller with the flag's name.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Enable = true
	o.Port = DefaultPort
	o.CertDir = DefaultCertDir
	o.CertManagement = CertSelf
	o.SecretName = DefaultSecretName
	o.ServiceName = DefaultServiceName
	o.ConfigurationName = DefaultConfigurationName
	o.Namespace = os.Getenv(NamespaceEnv)
	o.CertValidity = DefaultCertValidity
	o.RotateBefore = DefaultRotateBefore

	fs.BoolVar(&o.Enable, "enable-webhook", o.Enable,
		"serve the validating webhook for ImageCache")
	port := &cli.PositiveInt{Value: o.Port, Min: 1}
	fs.Var(&bound{Value: port, store: func() { o.Port = port.Value }}, "webhook-port",
		"`port` the webhook server listens on")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir,
		"directory holding the webhook's tls.crt and tls.key")
	mode := cli.NewEnum(o.CertManagement, CertSelf, CertExternal)
	fs.Var(&bound{Value: mode, store: func() { o.CertManagement = mode.Value }}, "webhook-cert-management",
		"`who` provides the webhook certificate: self (the controller keeps one in a Secret) or external (e.g. cert-manager)")
	fs.StringVar(&o.SecretName, "webhook-cert-secret", o.SecretName,
		"Secret, in the controller's namespace, that holds the shared webhook certificate (mode self)")
	fs.StringVar(&o.ServiceName, "webhook-service", o.ServiceName,
		"Service the apiserver calls the webhook through; names the certificate (mode self)")
	fs.StringVar(&o.ConfigurationName, "webhook-configuration", o.ConfigurationName,
		"ValidatingWebhookConfiguration that receives the CA bundle (mode self)")
	validity := &cli.Duration{Value: o.CertValidity, Min: time.Hour}
	fs.Var(&bound{Value: validity, store: func() { o.CertValidity = validity.Value }}, "webhook-cert-validity",
		"`lifetime` of the webhook's CA and serving certificate (mode self)")
	before := &cli.Duration{Value: o.RotateBefore, Min: time.Minute}
	fs.Var(&bound{Value: before, store: func() { o.RotateBefore = before.Value }}, "webhook-cert-rotate-before",
		"rotate the webhook certificate this `long` before it expires (mode self)")
}

// bound parses with one of the strict cli types and copies the result into
// the Options field it stands for.
type bound struct {
	flag.Value
	store func()
}

func (b *bound) Set(s string) error {
	if err := b.Value.Set(s); err != nil {
		return err
	}
	b.store()
	return nil
}

func (b *bound) String() string {
	if b == nil || b.Value == nil {
		return ""
	}
	return b.Value.String()
}

// Validate reports options that cannot work, naming the flag to fix.
func (o *Options) Validate() error {
	if !o.Enable {
		return nil
	}
	var errs []error
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d: use a port from 1 to 65535", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--webhook-cert-dir is empty: name the directory of tls.crt and tls.key"))
	}
	switch o.CertManagement {
	case CertExternal:
	case CertSelf:
		if o.namespace() == "" {
			errs = append(errs, fmt.Errorf("no namespace for the webhook certificate Secret: set %s", NamespaceEnv))
		}
		for flag, v := range map[string]string{"--webhook-cert-secret": o.SecretName,
			"--webhook-service": o.ServiceName, "--webhook-configuration": o.ConfigurationName} {
			if v == "" {
				errs = append(errs, fmt.Errorf("%s is empty: it is needed with --webhook-cert-management=self", flag))
			}
		}
		if o.RotateBefore <= 0 || o.CertValidity <= o.RotateBefore {
			errs = append(errs, fmt.Errorf("--webhook-cert-rotate-before %s must be positive and shorter than --webhook-cert-validity %s",
				o.RotateBefore, o.CertValidity))
		}
	default:
		errs = append(errs, fmt.Errorf("--webhook-cert-management %q: use %s or %s", o.CertManagement, CertSelf, CertExternal))
	}
	return errors.Join(errs...)
}

func (o *Options) namespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	return os.Getenv(NamespaceEnv)
}

// Hosts are the serving certificate's names: the first is the one the
// apiserver checks when it calls through the Service.
func (o *Options) Hosts() []string {
	svc, ns := o.ServiceName, o.namespace()
	hosts := []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
	return append(hosts, o.ExtraHosts...)
}

// Server returns the webhook server for ctrl.Options.WebhookServer. It waits
// for the certificate files before it listens: in mode self they appear only
// once the certificate keeper has run, and controller-runtime's server fails
// at once when they are missing.
func (o Options) Server() webhook.Server {
	inner := webhook.NewServer(webhook.Options{
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){pki.ServerTLS},
	})
	return &Server{Server: inner, opts: o}
}
