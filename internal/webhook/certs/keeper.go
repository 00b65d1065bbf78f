package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// Annotations on the Secret that pace a rotation across replicas; each
// replica reads them, so the pacing survives a restart or a change of hands.
const (
	AnnotationStagedAt   = "kubefledged.io/ca-staged-at"
	AnnotationSwitchedAt = "kubefledged.io/cert-switched-at"
)

// resync bounds how long a lost event or a tampered file goes unnoticed.
const resync = 5 * time.Minute

// Config says where the certificate lives and is used.
type Config struct {
	Policy
	Namespace  string
	SecretName string
	// ConfigurationName is the ValidatingWebhookConfiguration whose webhooks
	// all get the CA bundle. Empty: inject nowhere.
	ConfigurationName string
	// CertDir receives tls.crt and tls.key for the webhook server.
	CertDir string
	Log     logr.Logger
	// Now is the clock; tests set it.
	Now func() time.Time
}

// DefaultSettle is a tenth of the rotation margin, between 1s and 1m:
// watches deliver in well under a second, and a minute costs nothing when a
// rotation comes once in months.
func DefaultSettle(rotateBefore time.Duration) time.Duration {
	return min(max(rotateBefore/10, time.Second), time.Minute)
}

// Keeper keeps the shared Secret, the files of this replica and the webhook
// configuration's CA bundle in step. It runs on every replica: the files are
// per replica, and the Secret's optimistic concurrency makes a leader
// unnecessary.
type Keeper struct {
	cfg  Config
	cs   kubernetes.Interface
	poke chan struct{}

	mu sync.Mutex
	// trusted records when this replica first saw the webhook configuration
	// trust a CA, by fingerprint: the start of that CA's settle time.
	trusted map[string]time.Time
	// served is the material of the last successful sync.
	served *Material
}

// New returns a Keeper that talks to the cluster through cs.
func New(cs kubernetes.Interface, cfg Config) (*Keeper, error) {
	switch {
	case cfg.Namespace == "":
		return nil, errors.New("certificate keeper: no namespace (set KUBEFLEDGED_NAMESPACE)")
	case cfg.SecretName == "":
		return nil, errors.New("certificate keeper: no Secret name")
	case cfg.CertDir == "":
		return nil, errors.New("certificate keeper: no certificate directory")
	case len(cfg.Hosts) == 0:
		return nil, errors.New("certificate keeper: no host names")
	case cfg.Validity <= 0 || cfg.RotateBefore <= 0 || cfg.RotateBefore >= cfg.Validity:
		return nil, fmt.Errorf("certificate keeper: rotate-before %s must be positive and shorter than validity %s",
			cfg.RotateBefore, cfg.Validity)
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle(cfg.RotateBefore)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	return &Keeper{cfg: cfg, cs: cs, poke: make(chan struct{}, 1), trusted: map[string]time.Time{}}, nil
}

// NeedLeaderElection is false: every replica serves, so every replica needs
// its files and may repair the Secret and the configuration.
func (k *Keeper) NeedLeaderElection() bool { return false }

// Start keeps everything in step until ctx ends. Watches on the one Secret
// and the one configuration wake it at once when another replica rotates or
// an upgrade resets the bundle; timers wake it when a rotation is due.
func (k *Keeper) Start(ctx context.Context) error {
	name := func(n string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", n).String()
		})
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.Poke() },
		UpdateFunc: func(any, any) { k.Poke() },
		DeleteFunc: func(any) { k.Poke() },
	}
	secrets := informers.NewSharedInformerFactoryWithOptions(k.cs, resync,
		informers.WithNamespace(k.cfg.Namespace), name(k.cfg.SecretName))
	if _, err := secrets.Core().V1().Secrets().Informer().AddEventHandler(handler); err != nil {
		return err
	}
	secrets.Start(ctx.Done())
	defer secrets.Shutdown()
	if k.cfg.ConfigurationName != "" {
		configs := informers.NewSharedInformerFactoryWithOptions(k.cs, resync, name(k.cfg.ConfigurationName))
		inf := configs.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		configs.Start(ctx.Done())
		defer configs.Shutdown()
	}

	backoff := time.Duration(0)
	for {
		wake, err := k.Sync(ctx)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			wait = backoff
			k.cfg.Log.Error(err, "webhook certificate sync failed", "retryIn", wait)
		} else {
			backoff = 0
			wait = resync
			if !wake.IsZero() {
				wait = min(max(wake.Sub(k.cfg.Now()), 0), resync)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-k.poke:
		case <-t.C:
		}
		t.Stop()
	}
}

// Poke asks for a sync soon.
func (k *Keeper) Poke() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// Sync brings the Secret, the files and the configuration in step once and
// returns when to look again. Conflicts with other replicas are settled by
// reading again: the loser adopts the winner's material.
func (k *Keeper) Sync(ctx context.Context) (time.Time, error) {
	const attempts = 8
	for range attempts {
		secret, err := k.cs.CoreV1().Secrets(k.cfg.Namespace).Get(ctx, k.cfg.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secret, err = nil, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("read Secret %s/%s: %w", k.cfg.Namespace, k.cfg.SecretName, err)
		}
		vwc, err := k.getConfiguration(ctx)
		if err != nil {
			return time.Time{}, err
		}
		cur := materialOf(secret)
		now := k.cfg.Now()
		step, err := Plan(k.cfg.Policy, now, cur, k.trustedSince(cur, vwc, now))
		if err != nil {
			return time.Time{}, err
		}
		if step.Next != nil {
			err := k.store(ctx, secret, step.Next)
			if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
				// Another replica wrote first: adopt what it wrote.
				continue
			}
			if err != nil {
				return time.Time{}, err
			}
			k.cfg.Log.Info("webhook certificate updated", "secret", k.cfg.SecretName, "reason", step.Reason)
			// Plan again on what is stored now (a fresh Secret is
			// written back and read again, which also proves it was kept).
			continue
		}
		if err := k.writeFiles(cur); err != nil {
			return time.Time{}, err
		}
		if err := k.inject(ctx, vwc, cur.Bundle); err != nil {
			return time.Time{}, err
		}
		k.mu.Lock()
		k.served = cur
		k.mu.Unlock()
		return step.Wake, nil
	}
	return time.Time{}, fmt.Errorf("the Secret %s/%s kept changing under %d attempts", k.cfg.Namespace, k.cfg.SecretName, attempts)
}

func (k *Keeper) getConfiguration(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	if k.cfg.ConfigurationName == "" {
		return nil, nil
	}
	vwc, err := k.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, k.cfg.ConfigurationName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", k.cfg.ConfigurationName, err)
	}
	return vwc, nil
}

// trustedSince returns the start of cur's CA settle time. Without a
// configuration nothing calls the webhook through a bundle, so the time the
// CA was staged will do.
func (k *Keeper) trustedSince(cur *Material, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) time.Time {
	if cur == nil {
		return time.Time{}
	}
	ca, err := parseCert(cur.CACert)
	if err != nil {
		return time.Time{}
	}
	if vwc == nil || len(vwc.Webhooks) == 0 {
		return cur.StagedAt
	}
	fp := Fingerprint(ca)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range vwc.Webhooks {
		if !BundleContains(w.ClientConfig.CABundle, ca) {
			// An upgrade may have reset it: the settle time starts again
			// once it is repaired.
			delete(k.trusted, fp)
			return time.Time{}
		}
	}
	since, ok := k.trusted[fp]
	if !ok {
		// Only the current CA's time matters; forget earlier ones.
		k.trusted = map[string]time.Time{fp: now}
		since = now
	}
	return since
}

func (k *Keeper) store(ctx context.Context, secret *corev1.Secret, m *Material) error {
	if secret == nil {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.SecretName, Namespace: k.cfg.Namespace,
				Labels: map[string]string{
					"app.kubernetes.io/name":       "kubefledged",
					"app.kubernetes.io/component":  "webhook-certificate",
					"app.kubernetes.io/managed-by": "kubefledged-controller",
				}},
			Type: corev1.SecretTypeTLS,
		}
		setMaterial(secret, m)
		_, err := k.cs.CoreV1().Secrets(k.cfg.Namespace).Create(ctx, secret, metav1.CreateOptions{})
		return err
	}
	secret = secret.DeepCopy()
	setMaterial(secret, m)
	// The resourceVersion read above makes this a compare-and-swap.
	_, err := k.cs.CoreV1().Secrets(k.cfg.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
	return err
}

// inject puts the bundle into every webhook of the configuration where it
// differs. A Conflict means someone else changed the configuration; read it
// again and compare again.
func (k *Keeper) inject(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, bundle []byte) error {
	for range 8 {
		if vwc == nil {
			return nil
		}
		changed := false
		next := vwc.DeepCopy()
		for i := range next.Webhooks {
			if !bytes.Equal(next.Webhooks[i].ClientConfig.CABundle, bundle) {
				next.Webhooks[i].ClientConfig.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		_, err := k.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			k.cfg.Log.Info("CA bundle injected", "configuration", vwc.Name, "webhooks", len(next.Webhooks))
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("inject CA bundle into %s: %w", vwc.Name, err)
		}
		if vwc, err = k.getConfiguration(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("ValidatingWebhookConfiguration %s kept changing", k.cfg.ConfigurationName)
}

// writeFiles puts the serving pair into CertDir, each file replaced by a
// rename so the server's certificate watcher never reads half a file.
func (k *Keeper) writeFiles(m *Material) error {
	if err := os.MkdirAll(k.cfg.CertDir, 0o700); err != nil {
		return err
	}
	// Key first: the watcher reloads on the certificate's event too, and a
	// pair is only taken when both files match.
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyKey, m.Key}, {KeyCert, m.Cert}} {
		path := filepath.Join(k.cfg.CertDir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp, err := os.CreateTemp(k.cfg.CertDir, "."+f.name+".*")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o600)); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
	}
	return nil
}

// Bundle is the CA bundle of the last successful sync; nil before one.
func (k *Keeper) Bundle() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.served == nil {
		return nil
	}
	return k.served.Bundle
}

func materialOf(s *corev1.Secret) *Material {
	if s == nil {
		return nil
	}
	m := &Material{
		CACert: s.Data[KeyCA], CAKey: s.Data[KeyCAKey], Cert: s.Data[KeyCert], Key: s.Data[KeyKey],
		Bundle: s.Data[KeyBundle],
	}
	m.StagedAt, _ = time.Parse(time.RFC3339Nano, s.Annotations[AnnotationStagedAt])
	m.SwitchedAt, _ = time.Parse(time.RFC3339Nano, s.Annotations[AnnotationSwitchedAt])
	return m
}

func setMaterial(s *corev1.Secret, m *Material) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[KeyCA], s.Data[KeyCAKey], s.Data[KeyCert], s.Data[KeyKey], s.Data[KeyBundle] =
		m.CACert, m.CAKey, m.Cert, m.Key, m.Bundle
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationStagedAt] = m.StagedAt.UTC().Format(time.RFC3339Nano)
	s.Annotations[AnnotationSwitchedAt] = m.SwitchedAt.UTC().Format(time.RFC3339Nano)
}
