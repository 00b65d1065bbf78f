package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/webhook"
	"github.com/kubefledged/kube-fledged/internal/webhook/certs"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestRotationWithoutFailedAdmissions rotates the certificate of three
// replicas several times while admissions run without pause through all of
// them, and counts every admission that did not get the webhook's own
// answer. Two replicas keep the certificate themselves; the third gets the
// Secret's files 1.5 seconds late, like a replica whose watch lags, so a
// rotation that switched certificates in one step would fail admissions.
func TestRotationWithoutFailedAdmissions(t *testing.T) {
	e := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	const (
		config = "rotation.kubefledged.io"
		secret = "rotating-cert"
		lag    = 1500 * time.Millisecond
	)
	controller := e.namespace(t, "kf-rotation")
	ns := e.namespace(t, "rotation")
	var replicas []*replica
	for range 2 {
		o := options(controller, secret, config)
		// Due 4s after each switch; the settle time is then 2.6s.
		o.CertValidity, o.RotateBefore = 30*time.Second, 26*time.Second
		replicas = append(replicas, scopedReplica(t, o))
	}
	slow := options("", "", "")
	slow.CertManagement = webhook.CertExternal
	lagging := make(chan struct{})
	go copyLate(t, e, controller, secret, slow.CertDir, lag, lagging)
	replicas = append(replicas, scopedReplica(t, slow))
	t.Cleanup(func() { close(lagging) })
	g.Expect(e.configuration(config, "rotation", nil, replicas...)).To(Succeed())
	t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, config, metav1.DeleteOptions{})
	})
	e.waitServing(t, ns)

	// Watch what each replica serves.
	var mu sync.Mutex
	seen := map[int]map[string]bool{}
	stopWatch := make(chan struct{})
	var watchers sync.WaitGroup
	for _, r := range replicas {
		seen[r.opts.Port] = map[string]bool{}
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			for {
				if der, err := r.served(); err == nil {
					mu.Lock()
					seen[r.opts.Port][string(der)] = true
					mu.Unlock()
				}
				select {
				case <-stopWatch:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	rotations := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := -1
		for _, certs := range seen {
			if n < 0 || len(certs)-1 < n {
				n = len(certs) - 1
			}
		}
		return n
	}

	// Admissions without pause: good creates (dry run, so etcd stays small)
	// must pass, bad ones must get the webhook's rejection, and a stored
	// ImageCache is updated now and then. Anything else is a failure.
	stored := goodCache(ns, "stored")
	g.Expect(e.c.Create(ctx, stored)).To(Succeed())
	var total, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch {
				case i%5 == 4:
					ic := goodCache(ns, fmt.Sprintf("bad-%d-%d", w, i))
					ic.Spec.CacheSpec[0].Images = []string{"nginx", "nginx:latest"}
					err = e.c.Create(ctx, ic, client.DryRunAll)
					if apierrors.IsInvalid(err) && strings.Contains(err.Error(), `admission webhook "r`) &&
						strings.Contains(err.Error(), `names the same image as spec.cacheSpec[0].images[0] ("nginx")`) {
						err = nil
					} else if err == nil {
						err = fmt.Errorf("a bad ImageCache was accepted")
					}
				case w == 0 && i%10 == 3:
					cur := &v1alpha2.ImageCache{}
					if err = e.c.Get(ctx, client.ObjectKeyFromObject(stored), cur); err == nil {
						cur.Spec.CacheSpec[0].Images = []string{fmt.Sprintf("nginx:1.%d", i)}
						err = e.c.Update(ctx, cur)
					}
				default:
					err = e.c.Create(ctx, goodCache(ns, fmt.Sprintf("good-%d-%d", w, i)), client.DryRunAll)
				}
				total.Add(1)
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
				}
			}
		}()
	}

	start := time.Now()
	g.Eventually(rotations).WithTimeout(framework.ClusterTimeout).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", 3))
	close(stop)
	workers.Wait()
	close(stopWatch)
	watchers.Wait()
	t.Logf("%d rotations in %s, %d admissions, %d failed", rotations(), time.Since(start).Round(time.Millisecond),
		total.Load(), failed.Load())
	failures.Range(func(k, _ any) bool { t.Errorf("failed admission: %s", k); return true })
	g.Expect(failed.Load()).To(BeZero())
	g.Expect(total.Load()).To(BeNumerically(">", 100))

	// After all that, both replicas serve what the Secret holds, and the
	// bundle holds the current CA and the one before.
	s, err := e.kube.CoreV1().Secrets(controller).Get(ctx, "rotating-cert", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range replicas {
		g.Eventually(func() []byte {
			s, err = e.kube.CoreV1().Secrets(controller).Get(ctx, "rotating-cert", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			onDisk, _ := os.ReadFile(filepath.Join(r.opts.CertDir, certs.KeyCert))
			if string(onDisk) != string(s.Data[certs.KeyCert]) {
				return nil
			}
			der, _ := r.served()
			return der
		}).WithTimeout(framework.ClusterTimeout).Should(Equal(derOf(g, s.Data[certs.KeyCert])))
	}
}

// copyLate writes the Secret's serving pair into dir, each version lag after
// it appeared.
func copyLate(t *testing.T, e *env, ns, name, dir string, lag time.Duration, stop chan struct{}) {
	type version struct {
		at        time.Time
		cert, key []byte
	}
	var pending []version
	var last string
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		s, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && string(s.Data[certs.KeyCert]) != last {
			last = string(s.Data[certs.KeyCert])
			pending = append(pending, version{time.Now().Add(lag), s.Data[certs.KeyCert], s.Data[certs.KeyKey]})
		}
		for len(pending) > 0 && time.Now().After(pending[0].at) {
			v := pending[0]
			pending = pending[1:]
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Error(err)
				return
			}
			for f, data := range map[string][]byte{certs.KeyKey: v.key, certs.KeyCert: v.cert} {
				tmp := filepath.Join(dir, "."+f)
				if err := os.WriteFile(tmp, data, 0o600); err != nil {
					t.Error(err)
					return
				}
				if err := os.Rename(tmp, filepath.Join(dir, f)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}
}

// TestExternalCertificates plays cert-manager: the replica waits for the
// files, serves them once they appear, and keeps no Secret of its own.
func TestExternalCertificates(t *testing.T) {
	e := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := e.namespace(t, "external")
	o := options("", "", "")
	o.CertManagement = webhook.CertExternal
	r := scopedReplica(t, o)

	g.Consistently(r.ready).WithTimeout(time.Second).ShouldNot(Succeed(), "ready without a certificate")
	_, err := r.served()
	g.Expect(err).To(HaveOccurred(), "listening without a certificate")

	step, err := certs.Plan(certs.Policy{Name: "external", Hosts: []string{"127.0.0.1"},
		Validity: time.Hour, RotateBefore: time.Minute, Settle: time.Second}, time.Now(), nil, time.Time{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(o.CertDir, 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(o.CertDir, certs.KeyKey), step.Next.Key, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(o.CertDir, certs.KeyCert), step.Next.Cert, 0o600)).To(Succeed())
	const config = "external.kubefledged.io"
	g.Expect(e.configuration(config, "external", step.Next.Bundle, r)).To(Succeed())
	t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, config, metav1.DeleteOptions{})
	})
	e.waitServing(t, ns)
	g.Eventually(r.ready).WithTimeout(framework.ClusterTimeout).Should(Succeed())

	ic := goodCache(ns, "ext")
	ic.Spec.CacheSpec[0].Images = []string{"NGINX"}
	g.Expect(denial(t, e.c.Create(ctx, ic))).To(ContainSubstring(
		`admission webhook "r0.external.kubefledged.io" denied the request: ImageCache.kubefledged.io "ext" is invalid: spec.cacheSpec[0].images[0]: Invalid value: "NGINX"`))
	// The bundle stays as the external injector left it.
	g.Expect(configurationBundles(g, e, config)).To(HaveEach(Equal(step.Next.Bundle)))
}
