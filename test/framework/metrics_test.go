package framework

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

func TestScrape(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Expect(r.URL.Path).To(Equal("/metrics"))
		fmt.Fprint(w, "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1 2\"} 3\nb 4.5\nc NaN-ish\n\n")
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().(*net.TCPAddr).String()
	g.Expect(Scrape(g, addr)).To(Equal(map[string]float64{`a_total{x="1 2"}`: 3, "b": 4.5}))
	g.Expect(Samples([]byte("b 4.5\nc NaN-ish\n"))).To(Equal(map[string]string{"b": "4.5", "c": "NaN-ish"}))
}
