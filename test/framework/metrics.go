package framework

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	. "github.com/onsi/gomega"
)

// Scrape reads a Prometheus metrics endpoint (host:port) into "name{labels}" -> value.
func Scrape(g Gomega, addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for series, value := range Samples(body) {
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[series] = v
		}
	}
	return out
}

// Samples splits a text exposition into "name{labels}" -> value as served, comments left out.
func Samples(body []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}
