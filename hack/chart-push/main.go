// Command chart-push packages a chart and pushes it to an OCI registry with
// the Helm SDK's registry client, as `helm package` and `helm push` would,
// so that `helm install oci://REGISTRY/PATH/NAME --version V` installs it.
//
//	go run ./hack/chart-push -chart helm-charts/kubefledged -repo oci://ghcr.io/kubefledged/charts \
//	  [-plain-http] [-source-date-epoch SECONDS] [-out DIR]
//
// Credentials are Helm's (`helm registry login`), then Docker's. Plain HTTP
// is used with -plain-http, and always for registries on localhost and
// loopback addresses, as make image-push does.
//
// The push is reproducible: the archive's entries and the OCI manifest's
// creation annotation carry -source-date-epoch (make passes the last
// commit's time) instead of the time of the push, so two pushes of one
// commit give one digest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
)

func main() {
	chartDir := flag.String("chart", "helm-charts/kubefledged", "the chart's directory")
	repo := flag.String("repo", "", "where to push, oci://REGISTRY/PATH (required); the chart lands at PATH/NAME:VERSION")
	plainHTTP := flag.Bool("plain-http", false, "use plain HTTP (always used for localhost and loopback addresses)")
	epoch := flag.Int64("source-date-epoch", 0, "the time, in seconds since 1970, the archive and manifest carry")
	out := flag.String("out", "", "keep the packaged chart in this directory (default: a temporary one)")
	flag.Parse()
	res, err := Push(Options{Chart: *chartDir, Repo: *repo, PlainHTTP: *plainHTTP, Time: time.Unix(*epoch, 0).UTC(), OutDir: *out, Log: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart-push:", err)
		os.Exit(1)
	}
	fmt.Printf("pushed %s (manifest %s, chart %s)\n", res.Ref, res.Manifest.Digest, res.Chart.Digest)
}

// Options of one push.
type Options struct {
	Chart, Repo string
	PlainHTTP   bool
	Time        time.Time
	OutDir      string
	Log         io.Writer
}

// Push packages the chart and pushes it.
func Push(o Options) (*registry.PushResult, error) {
	host, path, ok := strings.Cut(strings.TrimPrefix(o.Repo, "oci://"), "/")
	if !strings.HasPrefix(o.Repo, "oci://") || !ok || host == "" || path == "" {
		return nil, fmt.Errorf("-repo %q is not oci://REGISTRY/PATH", o.Repo)
	}
	dir := o.OutDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "chart-push-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pkg := action.NewPackage()
	pkg.Destination = dir
	archive, err := pkg.Run(o.Chart, nil)
	if err != nil {
		return nil, fmt.Errorf("packaging %s: %w", o.Chart, err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		return nil, err
	}
	if data, err = stamp(data, o.Time); err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		return nil, err
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the packaged chart does not load: %w", err)
	}
	opts := []registry.ClientOption{registry.ClientOptEnableCache(true)}
	if o.Log != nil {
		opts = append(opts, registry.ClientOptWriter(o.Log))
	}
	if o.PlainHTTP || loopback(host) {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("%s/%s/%s:%s", host, strings.Trim(path, "/"), chrt.Metadata.Name, chrt.Metadata.Version)
	return client.Push(data, ref, registry.PushOptStrictMode(true), registry.PushOptCreationTime(o.Time.Format(time.RFC3339)))
}

// loopback says whether a registry host is this machine, where plain HTTP
// is what registries under test serve.
func loopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// stamp rewrites a chart archive with every entry's time set to t and a
// gzip header without time or name, so that its bytes depend on the chart's
// files alone (Helm stamps each entry with the time of packaging).
func stamp(data []byte, t time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = t, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
