package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const (
	ns      = "kf"
	secret  = "kf-webhook-cert"
	vwcName = "validate-image-cache.kubefledged.io"
)

// clock is a settable time source shared by keepers in a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func vwc(webhooks ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vwcName}}
	for _, n := range webhooks {
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: n,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("Cg==")}})
	}
	return v
}

func newKeeper(g *WithT, cs *fake.Clientset, dir string, clk *clock) *Keeper {
	k, err := New(cs, Config{
		Policy:     Policy{Name: "svc", Hosts: hosts, Validity: time.Hour, RotateBefore: 20 * time.Minute, Settle: 10 * time.Second},
		Namespace:  ns,
		SecretName: secret, ConfigurationName: vwcName, CertDir: dir, Now: clk.Now,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return k
}

func readFile(g *WithT, path string) []byte {
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}

func getSecret(g *WithT, cs *fake.Clientset) *corev1.Secret {
	s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), secret, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

// watching is closed once a watch of resource is open. The fake tracker
// keeps no history, so a change made between an informer's list and its
// watch is never delivered: a test that wants a change seen waits for this.
func watching(cs *fake.Clientset, resource string) <-chan struct{} {
	open := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), a.(k8stesting.WatchActionImpl).ListOptions)
		if err == nil {
			once.Do(func() { close(open) })
		}
		return true, w, err
	})
	return open
}

func getVWC(g *WithT, cs *fake.Clientset) *admissionregistrationv1.ValidatingWebhookConfiguration {
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), vwcName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

func TestKeepersShareOneCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cs := fake.NewClientset(vwc("a.kubefledged.io", "b.kubefledged.io"))
	clk := &clock{now: t0}
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := newKeeper(g, cs, dirA, clk), newKeeper(g, cs, dirB, clk)

	_, err := a.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	s := getSecret(g, cs)
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(readFile(g, filepath.Join(dirA, KeyCert))).To(Equal(s.Data[KeyCert]))
	g.Expect(readFile(g, filepath.Join(dirB, KeyCert))).To(Equal(s.Data[KeyCert]))
	g.Expect(readFile(g, filepath.Join(dirB, KeyKey))).To(Equal(s.Data[KeyKey]))
	st, err := os.Stat(filepath.Join(dirB, KeyKey))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	for _, w := range getVWC(g, cs).Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(s.Data[KeyBundle]), w.Name)
	}
	g.Expect(a.Bundle()).To(Equal(b.Bundle()))
	creates := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "create" && act.GetResource().Resource == "secrets" {
			creates++
		}
	}
	g.Expect(creates).To(Equal(1))
}

// TestKeeperAdoptsTheWinner plays a replica that loses both races: the
// create (AlreadyExists) and a rotation update (Conflict). It must end up
// serving what the winner stored, not its own material.
func TestKeeperAdoptsTheWinner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cs := fake.NewClientset(vwc("a.kubefledged.io"))
	clk := &clock{now: t0}
	dir := t.TempDir()
	k := newKeeper(g, cs, dir, clk)

	var winner *Material
	loseOnce(cs, "create", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, secret), func() {
		s, err := Plan(k.cfg.Policy, clk.Now(), nil, time.Time{})
		g.Expect(err).NotTo(HaveOccurred())
		winner = s.Next
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns}, Type: corev1.SecretTypeTLS}
		setMaterial(obj, winner)
		g.Expect(cs.Tracker().Add(obj)).To(Succeed())
	})
	_, err := k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(winner.Cert))

	// Rotation due: the other replica stages first.
	clk.Add(41 * time.Minute)
	var staged *Material
	loseOnce(cs, "update", apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, secret, nil), func() {
		s, err := Plan(k.cfg.Policy, clk.Now(), winner, time.Time{})
		g.Expect(err).NotTo(HaveOccurred())
		staged = s.Next
		obj := getSecretFromTracker(g, cs)
		setMaterial(obj, staged)
		g.Expect(cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, obj, ns)).To(Succeed())
	})
	_, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getSecret(g, cs).Data[KeyCA]).To(Equal(staged.CACert))
	g.Expect(k.Bundle()).To(Equal(staged.Bundle))
	g.Expect(getVWC(g, cs).Webhooks[0].ClientConfig.CABundle).To(Equal(staged.Bundle))
}

func getSecretFromTracker(g *WithT, cs *fake.Clientset) *corev1.Secret {
	obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, ns, secret)
	g.Expect(err).NotTo(HaveOccurred())
	return obj.(*corev1.Secret).DeepCopy()
}

func TestKeeperRotatesThroughTheConfiguration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cs := fake.NewClientset(vwc("a.kubefledged.io"))
	clk := &clock{now: t0}
	dir := t.TempDir()
	k := newKeeper(g, cs, dir, clk)

	wake, err := k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	first := getSecret(g, cs)
	g.Expect(wake).To(Equal(t0.Add(40 * time.Minute)))

	// Stage: new CA in the Secret and the configuration, same files.
	clk.now = wake
	_, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	staged := getSecret(g, cs)
	g.Expect(staged.Data[KeyCA]).NotTo(Equal(first.Data[KeyCA]))
	g.Expect(staged.Data[KeyBundle]).To(Equal(append(append([]byte{}, staged.Data[KeyCA]...), first.Data[KeyCA]...)))
	g.Expect(getVWC(g, cs).Webhooks[0].ClientConfig.CABundle).To(Equal(staged.Data[KeyBundle]))
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(first.Data[KeyCert]))

	// The next look sees the configuration trust the new CA; the switch
	// waits a settle time from then.
	clk.Add(time.Second)
	wake, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wake).To(Equal(clk.Now().Add(10 * time.Second)))
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(first.Data[KeyCert]))

	// An upgrade resets the bundle meanwhile: repaired, and the settle
	// time starts again.
	v := getVWC(g, cs)
	v.Webhooks[0].ClientConfig.CABundle = []byte("Cg==")
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	clk.Add(9 * time.Second)
	_, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getVWC(g, cs).Webhooks[0].ClientConfig.CABundle).To(Equal(staged.Data[KeyBundle]))
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(first.Data[KeyCert]), "no switch right after a reset")
	clk.Add(2 * time.Second)
	wake, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(first.Data[KeyCert]))

	// Switch.
	clk.now = wake
	_, err = k.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	switched := getSecret(g, cs)
	g.Expect(switched.Data[KeyCert]).NotTo(Equal(first.Data[KeyCert]))
	g.Expect(readFile(g, filepath.Join(dir, KeyCert))).To(Equal(switched.Data[KeyCert]))
	g.Expect(Verify(staged.Data[KeyCA], switched.Data[KeyCert], hosts[0], clk.Now())).To(Succeed())
	g.Expect(switched.Annotations).To(HaveKeyWithValue(AnnotationSwitchedAt, clk.Now().UTC().Format(time.RFC3339Nano)))
}

// TestKeeperStartRepairsQuickly runs the watch loop: a reset bundle comes
// back within moments, without waiting for a timer.
func TestKeeperStartRepairsQuickly(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset(vwc("a.kubefledged.io", "b.kubefledged.io"))
	k := newKeeper(g, cs, t.TempDir(), &clock{now: time.Now()})
	k.cfg.Now = time.Now
	configWatched := watching(cs, "validatingwebhookconfigurations")
	done := make(chan error)
	go func() { done <- k.Start(ctx) }()

	g.Eventually(func() []byte { return k.Bundle() }).WithTimeout(5 * time.Second).ShouldNot(BeNil())
	bundle := k.Bundle()
	g.Eventually(func() bool {
		for _, w := range getVWC(g, cs).Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				return false
			}
		}
		return true
	}).WithTimeout(5 * time.Second).Should(BeTrue())

	g.Eventually(configWatched).WithTimeout(5 * time.Second).Should(BeClosed())
	v := getVWC(g, cs)
	v.Webhooks[1].ClientConfig.CABundle = nil
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []byte { return getVWC(g, cs).Webhooks[1].ClientConfig.CABundle }).
		WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(bundle))

	cancel()
	g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
}

func TestNewRejectsBadConfig(t *testing.T) {
	g := NewWithT(t)
	cs := fake.NewClientset()
	good := Config{Policy: Policy{Hosts: hosts, Validity: time.Hour, RotateBefore: time.Minute},
		Namespace: ns, SecretName: secret, CertDir: "/tmp/x"}
	_, err := New(cs, good)
	g.Expect(err).NotTo(HaveOccurred())
	for name, mutate := range map[string]func(*Config){
		"no namespace": func(c *Config) { c.Namespace = "" },
		"no secret":    func(c *Config) { c.SecretName = "" },
		"no dir":       func(c *Config) { c.CertDir = "" },
		"no hosts":     func(c *Config) { c.Hosts = nil },
		"margin":       func(c *Config) { c.RotateBefore = 2 * time.Hour },
	} {
		c := good
		mutate(&c)
		_, err := New(cs, c)
		g.Expect(err).To(HaveOccurred(), name)
	}
	g.Expect(DefaultSettle(30 * 24 * time.Hour)).To(Equal(time.Minute))
	g.Expect(DefaultSettle(15 * time.Second)).To(Equal(1500 * time.Millisecond))
	g.Expect(DefaultSettle(time.Second)).To(Equal(time.Second))
}

// loseOnce makes this replica lose one race for the Secret: the first verb
// it sends is refused with refusal, after store has put the other replica's
// Secret in its place.
func loseOnce(cs *fake.Clientset, verb string, refusal error, store func()) {
	lost := false
	cs.PrependReactor(verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lost {
			return false, nil, nil
		}
		lost = true
		store()
		return true, nil, refusal
	})
}
