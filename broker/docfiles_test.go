package broker

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goFileName is a Go file name as a doc comment names one: a bare name
// (in the package's own directory) or a repository path.
var goFileName = regexp.MustCompile(`\b[A-Za-z0-9_./-]*[A-Za-z0-9_]\.go\b`)

// TestDocFilesExist: every Go file a package's doc.go names exists — in
// the package's directory, or as a path from the repository root — so a
// doc comment cannot go on describing a file that was moved or deleted.
// NN_name.go, the pattern of the API files, is not a file.
func TestDocFilesExist(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "compat-tests" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "doc.go" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, name := range goFileName.FindAllString(string(raw), -1) {
			if name == "NN_name.go" {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, name)); err == nil {
				continue
			}
			t.Errorf("%s names %s, which does not exist", path, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
