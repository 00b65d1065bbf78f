// Command apiprobe asks the API server for its version the way an in-cluster client finds
// it: the kubernetes Service from the environment the kubelet sets, the ServiceAccount's
// token and CA from their mount. The real node's tests run it in a pod to show that pods
// reach the API server through kube-proxy. It writes the version, or why it failed, to the
// termination log, where the test reads it from the pod's status; no client library, so
// that it builds in seconds.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	v, err := version()
	msg := v
	if err != nil {
		msg = err.Error()
	}
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	fmt.Println(msg)
}

func version() (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT unset")
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return "", err
	}
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("no certificate in %sca.crt", sa)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/version", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /version: %s", resp.Status)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}
