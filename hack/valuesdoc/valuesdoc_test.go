package valuesdoc

import (
	"reflect"
	"testing"
)

func TestRows(t *testing.T) {
	values := `# A comment about the file, not a key.

# -- Replicas.
replicas: 1
# Not documentation: a heading.
image:
  # -- Repository
  # of the image.
  repository: example.com/x
  tag: ""
# -- Resources, documented whole.
resources:
  limits:
    memory: 1Gi
# An older note.
# -- The newest "--" line starts the description.
ratio: 0.5
empty: {}
list: [a, b]
flag: false
nothing:
`
	rows, err := Rows([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"empty", "object", "{}", ""},
		{"flag", "bool", "false", ""},
		{"image.repository", "string", `"example.com/x"`, "Repository of the image."},
		{"image.tag", "string", `""`, ""},
		{"list", "list", `["a","b"]`, ""},
		{"nothing", "string", "null", ""},
		{"ratio", "float", "0.5", `The newest "--" line starts the description.`},
		{"replicas", "int", "1", "Replicas."},
		{"resources", "object", `{"limits":{"memory":"1Gi"}}`, "Resources, documented whole."},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	if _, err := Rows([]byte("- a\n- b\n")); err == nil {
		t.Error("a list as values accepted")
	}
}

func TestSplit(t *testing.T) {
	for _, c := range []struct{ in, flag, text string }{
		{"--image-pull-policy: IfNotPresent skips", "--image-pull-policy", "IfNotPresent skips"},
		{"--health-probe-bind-address port, serving /healthz", "", "--health-probe-bind-address port, serving /healthz"},
		{"Serve the webhook.", "", "Serve the webhook."},
	} {
		if flag, text := Split(c.in); flag != c.flag || text != c.text {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", c.in, flag, text, c.flag, c.text)
		}
	}
}
