package fake

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFakeDoesNotCarryEmulators: the protocol emulators live beside their
// adapters (power/redfish/redfishtest, power/ipmi/ipmitest); an importer of
// fake does not get go-ipmi's server or an HTTP test server (issue 25, D).
func TestFakeDoesNotCarryEmulators(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/bougou/go-ipmi") || path == "net/http/httptest" || path == "net/http" {
				t.Errorf("%s imports %s: emulators belong in power/redfish/redfishtest and power/ipmi/ipmitest", f, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
