// Package certs keeps the webhook's serving certificate without extra
// software: one Secret, shared by every replica, holds a CA and a serving
// certificate; each replica serves from it and injects the CA bundle into the
// ValidatingWebhookConfiguration.
//
// The original gave each replica its own CA and left the bundle to a Helm
// placeholder, so a second replica or an upgrade broke admission (#200, #63).
// Here whichever replica first finds the Secret missing or due creates or
// rotates it with optimistic concurrency, and the others adopt the result.
//
// Rotation never presents a certificate the apiserver does not trust:
//
//  1. stage: a new CA joins the bundle (new CA + current CA); the serving
//     certificate is unchanged, so it is trusted by both the old and the new
//     bundle;
//  2. switch: once the webhook configuration has held the new bundle for a
//     settle time, the serving certificate is re-issued from the new CA,
//     which the bundle already trusts;
//  3. the previous CA leaves the bundle only at the next stage, and not
//     before a settle time after the switch, so replicas still serving the
//     previous certificate have picked up the new one.
package certs

import (
	"bytes"
	"fmt"
	"time"
)

// Policy says what certificate to keep and how to pace its rotation.
type Policy struct {
	// Name prefixes the CA's common name (the service name reads well).
	Name string
	// Hosts are the serving certificate's names; the first is its common name.
	Hosts []string
	// Validity is the lifetime of each CA and serving certificate.
	Validity time.Duration
	// RotateBefore starts a rotation this long before the serving
	// certificate expires.
	RotateBefore time.Duration
	// Settle is how long the webhook configuration must have trusted a new
	// CA before the serving certificate moves to it, and how long a new
	// serving certificate must have been out before its predecessor's CA
	// leaves the bundle: the time for the apiserver and every replica to see
	// a change.
	Settle time.Duration
}

// Step is what Plan decided.
type Step struct {
	// Next is the material to store; nil when the current material stands.
	Next *Material
	// Reason says why Next differs, for the log.
	Reason string
	// Wake is when to plan again, at the latest, if nothing else changes.
	Wake time.Time
}

// Plan decides the next content of the Secret from its current content (nil
// when the Secret does not exist) and trustedSince, the time since which the
// webhook configuration has been seen holding cur's CA (zero: not yet).
func Plan(p Policy, now time.Time, cur *Material, trustedSince time.Time) (Step, error) {
	if len(p.Hosts) == 0 {
		return Step{}, fmt.Errorf("no host names for the serving certificate")
	}
	if cur == nil {
		return fresh(p, now, nil, "no certificate yet")
	}
	m, err := parse(cur)
	if err != nil {
		return fresh(p, now, nil, "stored certificate unusable: "+err.Error())
	}
	if !now.Before(m.leaf.NotAfter) || !now.Before(m.ca.NotAfter) {
		// Too late to rotate without a gap; start over at once. The old CA
		// stays in the bundle, harmless, for symmetry with a rotation.
		return fresh(p, now, cur.CACert, "certificate expired")
	}
	leafByCA := m.leaf.CheckSignatureFrom(m.ca) == nil
	if !BundleContains(cur.Bundle, m.ca) || verifyLeaf(cur.Bundle, m.leaf, p.Hosts[0], now) != nil {
		if !leafByCA {
			return fresh(p, now, nil, "CA bundle trusts neither the CA nor the serving certificate")
		}
		next := *cur
		next.Bundle = cur.CACert
		return Step{Next: &next, Reason: "CA bundle repaired", Wake: now}, nil
	}

	if !leafByCA {
		// Staged: the bundle has the new CA, the serving certificate is
		// still from the previous one.
		if trustedSince.IsZero() {
			return Step{Wake: now.Add(p.Settle)}, nil
		}
		if at := trustedSince.Add(p.Settle); now.Before(at) {
			return Step{Wake: at}, nil
		}
		return reissueLeaf(p, now, cur, m, "serving certificate moved to the new CA")
	}

	if !coversHosts(m.leaf, p.Hosts) {
		return reissueLeaf(p, now, cur, m, fmt.Sprintf("serving certificate does not name all of %v", p.Hosts))
	}
	due := m.leaf.NotAfter.Add(-p.RotateBefore)
	if now.Before(due) {
		return Step{Wake: due}, nil
	}
	if at := cur.SwitchedAt.Add(p.Settle); now.Before(at) {
		return Step{Wake: at}, nil
	}
	caPEM, caKeyPEM, err := newCA(now, p.Validity, p.Name)
	if err != nil {
		return Step{}, err
	}
	next := &Material{
		CACert: caPEM, CAKey: caKeyPEM, Cert: cur.Cert, Key: cur.Key,
		Bundle:   concat(caPEM, cur.CACert),
		StagedAt: now, SwitchedAt: cur.SwitchedAt,
	}
	return Step{Next: next, Reason: fmt.Sprintf("rotation due (serving certificate expires %s): new CA staged",
		m.leaf.NotAfter.UTC().Format(time.RFC3339)), Wake: now.Add(p.Settle)}, nil
}

// fresh issues a new CA and serving certificate at once. Only for a first
// start or an unusable or expired Secret: a rotation goes through staging.
func fresh(p Policy, now time.Time, oldCA []byte, reason string) (Step, error) {
	caPEM, caKeyPEM, err := newCA(now, p.Validity, p.Name)
	if err != nil {
		return Step{}, err
	}
	ca, err := parseCert(caPEM)
	if err != nil {
		return Step{}, err
	}
	caKey, err := parseKey(caKeyPEM)
	if err != nil {
		return Step{}, err
	}
	cert, key, err := newLeaf(now, p.Validity, p.Hosts, ca, caKey)
	if err != nil {
		return Step{}, err
	}
	next := &Material{CACert: caPEM, CAKey: caKeyPEM, Cert: cert, Key: key,
		Bundle: concat(caPEM, oldCA), StagedAt: now, SwitchedAt: now}
	return Step{Next: next, Reason: reason, Wake: now}, nil
}

func reissueLeaf(p Policy, now time.Time, cur *Material, m *parsed, reason string) (Step, error) {
	cert, key, err := newLeaf(now, p.Validity, p.Hosts, m.ca, m.caKey)
	if err != nil {
		return Step{}, err
	}
	next := *cur
	next.Cert, next.Key, next.SwitchedAt = cert, key, now
	return Step{Next: &next, Reason: reason, Wake: now}, nil
}

func concat(parts ...[]byte) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		b.Write(p)
	}
	return b.Bytes()
}
