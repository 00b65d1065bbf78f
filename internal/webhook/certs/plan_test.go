package certs

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/internal/pki"
)

var (
	t0     = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	hosts  = []string{"svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local", "127.0.0.1"}
	policy = Policy{Name: "svc", Hosts: hosts, Validity: time.Hour, RotateBefore: 20 * time.Minute, Settle: 10 * time.Second}
)

func mustPlan(g *WithT, now time.Time, cur *Material, trusted time.Time) Step {
	s, err := Plan(policy, now, cur, trusted)
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

func TestPlanFirstIssue(t *testing.T) {
	g := NewWithT(t)
	s := mustPlan(g, t0, nil, time.Time{})
	g.Expect(s.Next).NotTo(BeNil())
	g.Expect(s.Reason).To(Equal("no certificate yet"))
	for _, h := range hosts {
		g.Expect(Verify(s.Next.Bundle, s.Next.Cert, h, t0)).To(Succeed(), h)
	}
	g.Expect(Verify(s.Next.Bundle, s.Next.Cert, "other.ns.svc", t0)).NotTo(Succeed())
	g.Expect(s.Next.Bundle).To(Equal(s.Next.CACert))

	// Nothing to do until the rotation is due.
	again := mustPlan(g, t0.Add(time.Minute), s.Next, time.Time{})
	g.Expect(again.Next).To(BeNil())
	leaf, _ := parseCert(s.Next.Cert)
	g.Expect(again.Wake).To(Equal(leaf.NotAfter.Add(-policy.RotateBefore)))
}

func TestPlanRotationStages(t *testing.T) {
	g := NewWithT(t)
	m0 := mustPlan(g, t0, nil, time.Time{}).Next
	due := t0.Add(policy.Validity - policy.RotateBefore)

	// 1. Stage: a new CA joins the bundle; the serving pair stays.
	st := mustPlan(g, due, m0, time.Time{})
	g.Expect(st.Next).NotTo(BeNil())
	m1 := st.Next
	g.Expect(m1.Cert).To(Equal(m0.Cert))
	g.Expect(m1.Key).To(Equal(m0.Key))
	g.Expect(m1.CACert).NotTo(Equal(m0.CACert))
	g.Expect(m1.Bundle).To(Equal(append(append([]byte{}, m1.CACert...), m0.CACert...)))
	g.Expect(m1.StagedAt).To(Equal(due))
	g.Expect(Verify(m1.Bundle, m1.Cert, hosts[0], due)).To(Succeed(), "old serving cert trusted by the new bundle")

	// 2. Not trusted yet by the configuration: wait.
	w := mustPlan(g, due.Add(time.Second), m1, time.Time{})
	g.Expect(w.Next).To(BeNil())
	g.Expect(w.Wake).To(Equal(due.Add(time.Second + policy.Settle)))

	// Trusted, but not settled.
	trusted := due.Add(2 * time.Second)
	w = mustPlan(g, trusted.Add(policy.Settle-time.Millisecond), m1, trusted)
	g.Expect(w.Next).To(BeNil())
	g.Expect(w.Wake).To(Equal(trusted.Add(policy.Settle)))

	// 3. Switch: a new serving cert from the new CA; the bundle stays.
	sw := mustPlan(g, trusted.Add(policy.Settle), m1, trusted)
	g.Expect(sw.Next).NotTo(BeNil())
	m2 := sw.Next
	g.Expect(m2.Cert).NotTo(Equal(m1.Cert))
	g.Expect(m2.Bundle).To(Equal(m1.Bundle))
	g.Expect(m2.CACert).To(Equal(m1.CACert))
	g.Expect(m2.SwitchedAt).To(Equal(trusted.Add(policy.Settle)))
	g.Expect(Verify(m2.Bundle, m2.Cert, hosts[0], m2.SwitchedAt)).To(Succeed())
	g.Expect(Verify(m1.CACert, m2.Cert, hosts[0], m2.SwitchedAt)).To(Succeed(), "signed by the new CA")

	// And then quiet until the next one.
	q := mustPlan(g, m2.SwitchedAt.Add(time.Second), m2, trusted)
	g.Expect(q.Next).To(BeNil())
	leaf, _ := parseCert(m2.Cert)
	g.Expect(q.Wake).To(Equal(leaf.NotAfter.Add(-policy.RotateBefore)))
}

func TestPlanWaitsAfterSwitchBeforeDroppingCA(t *testing.T) {
	g := NewWithT(t)
	p := policy
	p.RotateBefore = 59 * time.Minute // due one minute after issue
	m0, err := Plan(p, t0, nil, time.Time{})
	g.Expect(err).NotTo(HaveOccurred())
	m := *m0.Next
	m.SwitchedAt = t0.Add(time.Minute) // a switch that just happened
	s, err := Plan(p, t0.Add(time.Minute+time.Second), &m, time.Time{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Next).To(BeNil())
	g.Expect(s.Wake).To(Equal(t0.Add(time.Minute + p.Settle)))
}

func TestPlanRepairs(t *testing.T) {
	m0 := func(g *WithT) *Material { return mustPlan(g, t0, nil, time.Time{}).Next }
	cases := []struct {
		name   string
		now    time.Time
		mutate func(m *Material)
		reason string
		sameCA bool
	}{
		{name: "garbage", now: t0, mutate: func(m *Material) { m.Cert = []byte("junk") },
			reason: "stored certificate unusable: tls.crt: no PEM certificate"},
		{name: "key of another cert", now: t0, mutate: func(m *Material) { _, m.Key, _ = pki.NewKey() },
			reason: "stored certificate unusable: tls.key does not belong to tls.crt"},
		{name: "missing CA key", now: t0, mutate: func(m *Material) { m.CAKey = nil },
			reason: "stored certificate unusable: ca.key: no PEM key"},
		{name: "expired", now: t0.Add(2 * time.Hour), mutate: func(*Material) {}, reason: "certificate expired"},
		{name: "bundle reset", now: t0, mutate: func(m *Material) { m.Bundle = []byte("Cg==") },
			reason: "CA bundle repaired", sameCA: true},
		{name: "new host", now: t0, mutate: func(*Material) {}, sameCA: true,
			reason: "serving certificate does not name all of [svc.ns.svc svc svc.ns svc.ns.svc.cluster.local 127.0.0.1 ::1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			m := m0(g)
			c.mutate(m)
			p := policy
			if c.name == "new host" {
				p.Hosts = append(append([]string{}, hosts...), "::1")
			}
			s, err := Plan(p, c.now, m, time.Time{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Reason).To(Equal(c.reason))
			g.Expect(s.Next).NotTo(BeNil())
			for _, h := range p.Hosts {
				g.Expect(Verify(s.Next.Bundle, s.Next.Cert, h, c.now)).To(Succeed())
			}
			g.Expect(bytes.Equal(s.Next.CACert, m.CACert)).To(Equal(c.sameCA))
		})
	}
}

// TestRotationNeverUntrusted simulates many rotations with the delays of a
// real cluster: the configuration is written late, the apiserver sees it
// later still, and one replica picks up the Secret late while another
// (the writer) serves it at once. At every instant the
// certificate either replica serves must be trusted by the bundle the
// lagging apiserver holds, as long as every delay is below the settle time.
// A replica slower than the settle time shows the check has teeth.
func TestRotationNeverUntrusted(t *testing.T) {
	g := NewWithT(t)
	rotations, untrusted := simulate(g, 2750*time.Millisecond, 3*time.Second)
	g.Expect(rotations).To(BeNumerically(">=", 20))
	g.Expect(untrusted).To(BeZero())

	_, untrusted = simulate(g, 8*time.Second, 3*time.Second)
	g.Expect(untrusted).To(BeNumerically(">", 0), "a replica lagging past the settle time must show up")
	_, untrusted = simulate(g, 2750*time.Millisecond, time.Millisecond)
	g.Expect(untrusted).To(BeNumerically(">", 0), "without a settle time the lags must show up")
}

func simulate(g *WithT, replicaLag, settle time.Duration) (rotations, untrusted int) {
	p := Policy{Name: "svc", Hosts: hosts, Validity: 40 * time.Second, RotateBefore: 38 * time.Second, Settle: settle}
	const (
		step     = 250 * time.Millisecond
		writeLag = 1 * time.Second         // a replica injecting the bundle
		apiLag   = 1500 * time.Millisecond // the apiserver's informer
	)
	type at struct {
		t time.Time
		m *Material
	}
	var history []at // the Secret over time
	stateAt := func(t time.Time) *Material {
		var m *Material
		for _, h := range history {
			if !h.t.After(t) {
				m = h.m
			}
		}
		return m
	}
	verified := map[[2]*Material]bool{}
	var trustedFP string
	var trustedSince time.Time
	for now := t0; now.Before(t0.Add(3 * time.Minute)); now = now.Add(step) {
		cur := stateAt(now)
		// The configuration holds the bundle of the Secret as it was writeLag ago.
		if cfg := stateAt(now.Add(-writeLag)); cur != nil && cfg != nil {
			ca, _ := parseCert(cur.CACert)
			if BundleContains(cfg.Bundle, ca) {
				if fp := Fingerprint(ca); fp != trustedFP {
					trustedFP, trustedSince = fp, now
				}
			} else {
				trustedFP, trustedSince = "", time.Time{}
			}
		}
		s, err := Plan(p, now, cur, trustedSince)
		g.Expect(err).NotTo(HaveOccurred())
		if s.Next != nil {
			if cur != nil && !bytes.Equal(s.Next.Cert, cur.Cert) {
				rotations++
			}
			history = append(history, at{now, s.Next})
		}
		seenByAPI := stateAt(now.Add(-writeLag - apiLag))
		// Two replicas: the one that wrote the Secret, and a slow one.
		for _, served := range []*Material{cur, stateAt(now.Add(-replicaLag))} {
			if seenByAPI == nil || served == nil {
				continue // start-up: nothing calls the webhook yet
			}
			key := [2]*Material{seenByAPI, served}
			ok, done := verified[key]
			if !done {
				// Expiry is not at stake here (Plan rotates long before), only trust.
				ok = Verify(seenByAPI.Bundle, served.Cert, hosts[0], served.SwitchedAt) == nil
				verified[key] = ok
			}
			if !ok {
				untrusted++
			}
		}
	}
	return rotations, untrusted
}
