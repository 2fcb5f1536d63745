package inventory

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEDocumentsEveryKey (issue 27): the README's inventory table
// lists every key the inventory accepts (basic_auth, whose absence made
// the first plan against sushy-tools hang, was missing).
func TestREADMEDocumentsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i := strings.Index(readme, "### Inventory keys")
	require.GreaterOrEqual(t, i, 0, "the README has an inventory keys section")
	section := readme[i:]
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for f := range typ.Fields() {
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
				tag += "[]"
			}
			key := prefix + tag
			if ft.Kind() == reflect.Struct {
				walk(key+".", ft)
				if key != "defaults.bmc" {
					continue
				}
			}
			if strings.HasPrefix(key, "defaults.bmc.") || strings.HasPrefix(key, "servers[].bmc.") {
				key = strings.TrimPrefix(strings.TrimPrefix(key, "defaults."), "servers[].") // documented once, as bmc.*
			}
			assert.True(t, strings.Contains(section, "| `"+key+"` |"), "the README documents %s", key)
		}
	}
	walk("", reflect.TypeOf(Inventory{}))
}
