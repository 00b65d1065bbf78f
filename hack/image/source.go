package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// copied are the build-context paths the Dockerfile COPYs into the working
// directory; test/dockerfile fails when the files of the two images part.
var copied = []string{"watches.yaml", "helm-charts"}

// chartFile names the chart whose metadata describes the image, so that the
// description and the source address have one home.
const chartFile = "helm-charts/kubefledged/Chart.yaml"

// source is what the image is built from, read once so that every part of
// the image agrees on it.
type source struct {
	// revision is the commit, with -dirty when tracked files differ from it;
	// empty outside a git checkout.
	revision string
	// epoch stands for every timestamp in the image.
	epoch time.Time
	files []sourceFile
	chart struct {
		Description string `json:"description"`
		Home        string `json:"home"`
	}
}

type sourceFile struct {
	path string // slash-separated, relative to the repository root
	mode int64
}

func readSource() (*source, error) {
	s := &source{}
	inGit, err := s.readRevision()
	if err != nil {
		return nil, err
	}
	if inGit {
		s.files, err = gitFiles()
	} else {
		fmt.Fprintln(os.Stderr, "image: not a git checkout: no revision label, and the files are taken as found")
		s.files, err = walkFiles()
	}
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(chartFile)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &s.chart); err != nil {
		return nil, fmt.Errorf("%s: %w", chartFile, err)
	}
	if s.chart.Description == "" || s.chart.Home == "" {
		return nil, fmt.Errorf("%s: want a description and a home for the image's labels", chartFile)
	}
	return s, nil
}

// readRevision sets the revision and the epoch from the checkout, and says
// whether there is one. Every image of this program (ours, the bundle, the
// catalog, the OLM tool images) takes its timestamps from here.
func (s *source) readRevision() (inGit bool, err error) {
	if _, err := os.Stat("go.mod"); err != nil {
		return false, fmt.Errorf("run from the repository root (make image does): %w", err)
	}
	inGit = exec.Command("git", "rev-parse", "--is-inside-work-tree").Run() == nil
	if inGit {
		s.revision, err = gitOutput("rev-parse", "HEAD")
		if err != nil {
			return false, err
		}
		changes, err := gitOutput("status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return false, err
		}
		if changes != "" {
			s.revision += "-dirty"
		}
	}
	s.epoch, err = sourceDateEpoch(inGit)
	return inGit, err
}

// sourceDateEpoch follows reproducible-builds.org's SOURCE_DATE_EPOCH when it
// is set, and is otherwise the commit's time: a build of a commit is then the
// same whenever and wherever it runs.
func sourceDateEpoch(inGit bool) (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" && inGit {
		var err error
		if v, err = gitOutput("log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, err
		}
	}
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", v, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// gitFiles lists what git tracks under the copied paths: stray files in a
// checkout (editor backups, packaged charts) stay out of the image, and the
// modes are git's two rather than whatever the checkout's umask made.
func gitFiles() ([]sourceFile, error) {
	out, err := gitRaw(append([]string{"ls-files", "--stage", "-z", "--"}, copied...)...)
	if err != nil {
		return nil, err
	}
	var files []sourceFile
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok {
			return nil, fmt.Errorf("git ls-files: unexpected record %q", rec)
		}
		var mode int64
		switch strings.Fields(meta)[0] {
		case "100644":
			mode = 0o644
		case "100755":
			mode = 0o755
		default:
			// Symlinks and submodules: the chart has none, and the Dockerfile
			// would copy them differently from a plain file.
			return nil, fmt.Errorf("%s: git mode %s is not a regular file", p, meta)
		}
		files = append(files, sourceFile{path: p, mode: mode})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("git tracks none of %v", copied)
	}
	return files, nil
}

// walkFiles stands in for gitFiles in an unpacked source archive.
func walkFiles() ([]sourceFile, error) {
	var files []sourceFile
	for _, root := range copied {
		err := regularFiles(root, func(p string, mode int64) error {
			files = append(files, sourceFile{path: filepath.ToSlash(p), mode: mode})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

func gitOutput(args ...string) (string, error) {
	out, err := gitRaw(args...)
	return strings.TrimSpace(out), err
}

func gitRaw(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
