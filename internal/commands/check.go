package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cli"
)

// checkOptions are the flags of `kubefledged check`, which the chart's
// `helm test` Pod runs from our own image.
type checkOptions struct {
	Namespace   string
	Selector    string
	HealthPort  int
	Webhook     bool
	WebhookName string
	Timeout     cli.Duration
	Interval    time.Duration
	Kubeconfig  string
}

// The ImageCache the webhook must refuse: a reference no registry accepts,
// which the CRD's schema lets through and only the webhook checks.
const (
	checkCacheName = "kubefledged-check"
	checkBadImage  = "Not/A Valid:Reference"
)

// ChartWebhookName is the name of the chart's one webhook (its
// ValidatingWebhookConfiguration names the configuration as the release
// does, the webhook always so): the API server quotes it in every refusal.
const ChartWebhookName = "validate-image-cache.kubefledged.io"

// checkFlags parses and checks the flags of `kubefledged check`.
func checkFlags(args []string, stderr io.Writer) (checkOptions, error) {
	o := checkOptions{Interval: 2 * time.Second, Timeout: cli.Duration{Value: 2 * time.Minute, Min: time.Second}}
	fs := cli.NewFlagSet("check")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the controller pods and of the dry-run ImageCache (required)")
	fs.StringVar(&o.Selector, "selector", "", "label selector of the controller pods (required)")
	fs.IntVar(&o.HealthPort, "health-port", 8081, "port of the controller pods' /healthz and /readyz")
	fs.BoolVar(&o.Webhook, "webhook", true, "check that the webhook refuses an invalid ImageCache")
	fs.StringVar(&o.WebhookName, "webhook-name", ChartWebhookName, "name of the webhook, as the API server quotes it in a refusal")
	fs.Var(&o.Timeout, "timeout", "how long each check may take to pass")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return o, err
	}
	if o.Namespace == "" || o.Selector == "" {
		return o, errors.New("--namespace and --selector are required")
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return o, fmt.Errorf("--selector: %w", err)
	}
	if o.HealthPort < 1 || o.HealthPort > 65535 {
		return o, fmt.Errorf("--health-port: %d is not a port", o.HealthPort)
	}
	return o, nil
}

// runCheck checks an installed kube-fledged from inside the cluster: every
// controller pod answers /healthz and /readyz, and the API server calls the
// webhook, which refuses an invalid ImageCache (created with dryRun, so
// nothing is stored). Each check is retried until --timeout: `helm test`
// may run while a rollout still ends.
func runCheck(args []string, stdout, stderr io.Writer) error {
	o, err := checkFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.Kubeconfig, "")
	if err != nil {
		return err
	}
	pods, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	caches, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	c := &checker{opts: o, pods: pods, caches: caches, http: &http.Client{Timeout: 5 * time.Second}, out: stdout}
	return c.run(context.Background())
}

type checker struct {
	opts   checkOptions
	pods   kubernetes.Interface
	caches client.Client
	http   *http.Client
	out    io.Writer
}

// final marks an answer that retrying cannot change.
type final struct{ error }

func (c *checker) run(ctx context.Context) error {
	if err := c.retry(ctx, "controller health", c.health); err != nil {
		return err
	}
	if c.opts.Webhook {
		if err := c.retry(ctx, "webhook", c.webhook); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.out, "kube-fledged answers")
	return nil
}

// retry runs check until it passes, fails for good, or the timeout ends;
// the error is the last one that says why. An attempt cut short by the
// timeout itself only says that time ran out, so the attempt before it
// (a refused connection, a 500) is the one reported.
func (c *checker) retry(ctx context.Context, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout.Value)
	defer cancel()
	var why error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var f final
		if errors.As(err, &f) {
			return fmt.Errorf("%s: %w", what, f.error)
		}
		if why == nil || ctx.Err() == nil {
			why = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not passed within %s: %w", what, c.opts.Timeout.Value, why)
		case <-time.After(c.opts.Interval):
		}
	}
}

// health gets /healthz and /readyz of every running controller pod. The
// probes' port is not behind a Service, so the pods are asked at their IPs.
func (c *checker) health(ctx context.Context) error {
	list, err := c.pods.CoreV1().Pods(c.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: c.opts.Selector})
	if err != nil {
		return err
	}
	var running []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return fmt.Errorf("no running pod in %s matches %s (%d pods)", c.opts.Namespace, c.opts.Selector, len(list.Items))
	}
	for _, p := range running {
		for _, path := range []string{"/healthz", "/readyz"} {
			url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(c.opts.HealthPort)) + path
			if err := c.get(ctx, url); err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err)
			}
		}
		fmt.Fprintf(c.out, "controller pod %s (%s): /healthz and /readyz answer ok\n", p.Name, p.Status.PodIP)
	}
	return nil
}

func (c *checker) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// webhook asks the API server to create, as a dry run, an ImageCache only
// the webhook refuses. The refusal must be the webhook's own: an admitted
// cache means the webhook is not called at all, or lets anything through;
// any other error (no endpoints yet, a timeout) is retried.
func (c *checker) webhook(ctx context.Context) error {
	bad := &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: checkCacheName},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{checkBadImage}}}},
	}
	err := c.caches.Create(ctx, bad, client.DryRunAll)
	if err == nil {
		return final{fmt.Errorf("the API server admitted an ImageCache with image %q: the webhook %s is not called, or did not refuse it", checkBadImage, c.opts.WebhookName)}
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", c.opts.WebhookName)) {
		return err
	}
	fmt.Fprintf(c.out, "webhook %s refused an invalid ImageCache: %v\n", c.opts.WebhookName, err)
	return nil
}
