package scenario

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	blocks, ok := parse("# story\ncmd a\n----\nout 1\nout 2\n\ncmd b\n----\n\ncmd c\n----\nx\n")
	want := []block{{"# story\ncmd a\n", "out 1\nout 2\n"}, {"cmd b\n", ""}, {"cmd c\n", "x\n"}}
	if !ok || !reflect.DeepEqual(blocks, want) {
		t.Fatalf("parse = %q, %v", blocks, ok)
	}
	if _, ok := parse("cmd a\n----\nout\n\ncmd b\n"); ok {
		t.Fatal("a block without ---- must be refused")
	}
}
