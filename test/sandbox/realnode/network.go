package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Pods on the node reach the API server as pods anywhere do: in-cluster clients dial the
// `kubernetes` Service, 10.96.0.1:443, and kube-proxy turns that into an endpoint. The API
// server listens on 127.0.0.1 only, and a pod's packets cannot be sent there: the kubelet's
// KUBE-FIREWALL drops traffic to 127.0.0.0/8 that does not come from it, and the kernel
// does not route loopback addresses off the lo device anyway. So the endpoint is a TCP
// forwarder in this process on the bridge's gateway address, the host's own address on
// the pod network, which carries the bytes to the API server's loopback port untouched.
// TLS passes through: clients still verify the API server's certificate against the name
// they dialled, 10.96.0.1, which the sandbox's serving certificate already holds, so the
// gateway address needs no place in it. The forwarder relays connections from the pod
// subnet only: it opens the API server to the node's pods, not to whatever could send a
// packet to the gateway address.

// endpointManager marks the EndpointSlice as this package's: the API server runs with
// --endpoint-reconciler-type=none and kube-controller-manager leaves slices of Services
// without a selector to whoever made them.
const endpointManager = "realnode.kubefledged.io"

// gateway is the subnet's first address, which the bridge holds and pods route through.
func gateway(subnet *net.IPNet) net.IP {
	gw := make(net.IP, len(subnet.IP.To4()))
	copy(gw, subnet.IP.To4())
	gw[3]++
	return gw
}

// createBridge makes the pod bridge with the gateway address before any pod exists: the
// bridge plugin would make it only at the first pod, and the forwarder must listen on that
// address before then. The plugin adopts a bridge that has the address it would give it.
// The journal deletes the bridge at undo, as it did when the plugin made it.
func createBridge(name string, subnet *net.IPNet) error {
	ones, _ := subnet.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", "name", name, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", gateway(subnet), ones), "dev", name},
		{"link", "set", name, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("realnode: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// forwarder relays TCP connections from clients in from to target, byte for byte.
type forwarder struct {
	ln     net.Listener
	from   *net.IPNet
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startForwarder(listen string, from *net.IPNet, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("realnode: API forwarder: %w", err)
	}
	f := &forwarder{ln: ln, from: from, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) addr() *net.TCPAddr { return f.ln.Addr().(*net.TCPAddr) }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(os.Stderr, "realnode: API forwarder: %v\n", err)
			}
			return
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || !f.from.Contains(a.IP) {
			_ = c.Close()
			continue
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(c)
		}()
	}
}

// track registers c for close; false once the forwarder is closing.
func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// relay copies both ways until either side closes; then both go, since a TLS session with
// one side gone is over.
func (f *forwarder) relay(in net.Conn) {
	defer f.untrack(in)
	defer in.Close()
	out, err := net.DialTimeout("tcp", f.target, 10*time.Second)
	if err != nil {
		// The client sees a reset and retries, as it would against a restarting API server.
		return
	}
	defer out.Close()
	if !f.track(out) {
		return
	}
	defer f.untrack(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// close stops accepting, cuts every relayed connection and waits for the relays to end.
func (f *forwarder) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	f.wg.Wait()
}

// apiTarget is the API server's host:port from the sandbox's admin config.
func apiTarget(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("realnode: API server address %q: %w", host, err)
	}
	return u.Host, nil
}

// publishAPIEndpoint makes addr the endpoint of the `kubernetes` Service, under the name of
// the Service's port, so that kube-proxy sends 10.96.0.1:443 there.
func publishAPIEndpoint(ctx context.Context, c kubernetes.Interface, addr *net.TCPAddr) error {
	var svc *corev1.Service
	// The API server makes the Service shortly after it reports ready.
	for {
		var err error
		svc, err = c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("realnode: the kubernetes Service: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realnode: the kubernetes Service does not exist: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if len(svc.Spec.Ports) != 1 {
		return fmt.Errorf("realnode: the kubernetes Service has %d ports, want 1", len(svc.Spec.Ports))
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "kubernetes",
			Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "kubernetes",
				discoveryv1.LabelManagedBy:   endpointManager,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{addr.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{
			Name:     ptr.To(svc.Spec.Ports[0].Name),
			Port:     ptr.To(int32(addr.Port)),
			Protocol: ptr.To(corev1.ProtocolTCP),
		}},
	}
	eps := c.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := eps.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = eps.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		// A node of an earlier run on this sandbox left its own address.
		want.ResourceVersion = cur.ResourceVersion
		_, err = eps.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("realnode: the kubernetes EndpointSlice: %w", err)
	}
	return nil
}

// unpublishAPIEndpoint removes the endpoint again, so that a sandbox that outlives the node
// sends no pod to a forwarder that is gone. Best effort: the API server may be stopping too.
func unpublishAPIEndpoint(c kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = c.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Delete(ctx, "kubernetes", metav1.DeleteOptions{})
}
