package host

import "testing"

func TestUndoScript(t *testing.T) {
	before := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:MINE - [0:0]
-A INPUT -j MINE
COMMIT
`
	after := `*mangle
:PREROUTING ACCEPT [1:2]
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [5:6]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:MINE - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -j MINE
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP
COMMIT
`
	want := `*mangle
-F KUBE-IPTABLES-HINT
-F KUBE-KUBELET-CANARY
-X KUBE-IPTABLES-HINT
-X KUBE-KUBELET-CANARY
COMMIT
*filter
-D INPUT -j KUBE-FIREWALL
-D OUTPUT -j KUBE-FIREWALL
-F KUBE-FIREWALL
-X KUBE-FIREWALL
COMMIT
`
	if got := undoScript(before, after); got != want {
		t.Errorf("undoScript:\n%s\nwant:\n%s", got, want)
	}
	// A table the nft backend keeps with nothing but empty accepting chains is no change.
	if a, b := NormalizeIPTables(before), NormalizeIPTables(before+"*raw\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"); a != b {
		t.Errorf("an empty table counts as a change:\n%s\nvs\n%s", a, b)
	}
}
