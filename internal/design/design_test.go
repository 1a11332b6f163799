package design

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/parley-voice/parley"

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			t.Fatal("no go.mod above the test")
		}
	}
}

// imports maps each package of the module (short names: "app/cli", "" for main) to what it
// imports directly (module packages short, others in full), as `go list` reports them.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	short := func(p string) string {
		if p == module {
			return ""
		}
		return strings.TrimPrefix(p, module+"/")
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		var imps []string
		for _, i := range f[1:] {
			imps = append(imps, short(i))
		}
		m[short(f[0])] = imps
	}
	return m
}

// under says whether pkg is p or below it.
func under(pkg, p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }

// engines are the packages that load models; package app sees them through interfaces.
var engines = []string{"asr", "tts/chattts", "tts/kokoro", "tts/espeak", "tts/engines", "audio/vad", "audio/wake", "voices/speaker", "llm/builtin"}

// The "must not import" column of docs/DESIGN.md's package table, for direct imports (a rule
// that holds for every package holds for what they import too).
func TestImportRules(t *testing.T) {
	all := imports(t)
	type rule struct {
		pkg    string   // the package (and those below it, where sub is true)
		sub    bool     // the rule covers the packages below pkg too
		forbid []string // packages (and those below them) it must not import
	}
	fyne := "fyne.io/fyne/v2"
	rules := []rule{
		{"app/cli", true, []string{"app/gui", fyne}},
		{"app", false, append([]string{"app/gui", fyne}, engines...)},
		{"app/config", true, engines},
		{"app/factory", true, []string{"app/gui", "app/wire", "app/serve", "audio/device"}},
		{"app/wire", true, []string{"app/gui", fyne}},
		{"app/serve", true, []string{"app/gui", fyne}},
		{"app/tune", true, []string{"app/gui", fyne}},
		{"app/gui/wizard", true, append([]string{"app/cli", "app/wire", "app/serve", "audio/device"}, engines...)},
		{"app/gui/kit", true, []string{"app", "asr", "llm", "tts", "audio", "voices", "assets", "store", "gpu", "edit", "lang"}},
		{"audio", true, []string{"asr", "llm", "tts", "app"}},
		{"asr", true, []string{"llm", "tts", "app"}},
		{"llm", true, []string{"asr", "tts", "app"}},
		{"tts", true, []string{"asr", "llm", "app"}},
		{"voices", false, append([]string{"app"}, engines...)},
		{"voices/clone", true, []string{"app", "asr", "llm", "tts"}},
		{"voices/speaker", true, []string{"app", "asr", "llm", "tts", "audio/vad"}},
		{"gpu", true, []string{"app", "asr", "llm", "tts", "audio", "voices", "assets", "store"}},
		{"edit", true, []string{"app", "asr", "llm", "tts", "audio", "voices", "assets", "store", "gpu"}},
		{"lang", true, []string{"app", "asr", "llm", "tts", "audio", "voices", "assets", "store", "gpu", "edit", "internal"}},
		{"app/logging", true, []string{"app", "asr", "llm", "tts", "audio", "voices", "assets", "store", "gpu", "edit"}},
		{"assets", true, append([]string{"app"}, engines...)},
		{"store", true, append([]string{"app"}, engines...)},
	}
	for _, r := range rules {
		if _, ok := all[r.pkg]; !ok {
			t.Errorf("docs/DESIGN.md names %s, which is not a package", r.pkg)
		}
		for pkg, imps := range all {
			if pkg != r.pkg && !(r.sub && under(pkg, r.pkg)) {
				continue
			}
			if strings.HasSuffix(pkg, "test") && pkg != r.pkg {
				continue // a test-helper package (gpu/gputest, asr/asrtest) serves tests only
			}
			for _, i := range imps {
				for _, f := range r.forbid {
					// a package may import its own sub-packages (audio/vad below audio...)
					if under(i, f) && !under(i, pkg) && !(f == "audio" && under(pkg, "audio")) {
						t.Errorf("%s imports %s (docs/DESIGN.md: %s must not import %s)", pkg, i, r.pkg, f)
					}
				}
			}
		}
	}
	// app/gui hosts the wizard (wizard.Host): the wizard does not import app/gui (the kit
	// both draw with is below app/gui, so the rule above cannot say it).
	for pkg, imps := range all {
		if !under(pkg, "app/gui/wizard") {
			continue
		}
		for _, i := range imps {
			if i == "app/gui" {
				t.Errorf("%s imports app/gui (docs/DESIGN.md: app/gui/wizard must not import app/gui)", pkg)
			}
		}
	}
	// Fyne is imported by app/gui and main alone; PortAudio by audio/device alone.
	for pkg, imps := range all {
		for _, i := range imps {
			if under(i, fyne) && pkg != "" && !under(pkg, "app/gui") {
				t.Errorf("%s imports Fyne (only app/gui and main may)", pkg)
			}
			if strings.Contains(i, "portaudio") && pkg != "audio/device" {
				t.Errorf("%s imports PortAudio (only audio/device may)", pkg)
			}
		}
	}
}

// constructors are the functions that open an engine from a model (or a store from a file).
var constructors = map[string][]string{
	"asr":            {"New"},
	"tts/chattts":    {"New", "NewSampleEncoder"},
	"tts/kokoro":     {"New"},
	"tts/espeak":     {"New"},
	"tts/engines":    {"Open"},
	"audio/vad":      {"New", "NewWithModel", "OpenModel", "NewPool", "NewPooled"},
	"audio/wake":     {"New"},
	"voices/speaker": {"New"},
	"llm/builtin":    {"Open", "NewBackend"},
	"llm/brain":      {"New"},
	"llm/skills":     {"New"},
	"store":          {"Open", "OpenWith"},
}

// knownOutside are the constructor calls outside app/factory that issue 31 §1 is to move into
// it: the list may only shrink. A call not listed fails the test; so does a listed one that
// is gone (take it off the list).
var knownOutside = []string{}

// Engines are opened by app/factory: every constructor call in the app's code outside it
// (tests aside) is on the known list, which only shrinks.
func TestOnlyTheFactoryOpensEngines(t *testing.T) {
	base := root(t)
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "train" || rel == "build" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		// the app's code and main; an engine may open the parts it is made of (the recogniser
		// its VAD, tts/engines the voice it picks)
		if !(under(dir, "app") || dir == ".") || under(dir, "app/factory") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := map[string]string{} // local import name -> short package
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module+"/") {
				continue
			}
			short := strings.TrimPrefix(p, module+"/")
			if _, ok := constructors[short]; !ok || under(dir, short) {
				continue
			}
			name := short[strings.LastIndex(short, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = short
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if short, ok := names[id.Name]; ok && slices.Contains(constructors[short], sel.Sel.Name) {
				found = append(found, rel+": "+id.Name+"."+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	found = slices.Compact(found)
	t.Logf("constructor calls outside app/factory: %d", len(found))
	for _, c := range found {
		if !slices.Contains(knownOutside, c) {
			t.Errorf("%s opens an engine outside app/factory: open it through the factory", c)
		}
	}
	for _, c := range knownOutside {
		if !slices.Contains(found, c) {
			t.Errorf("%s is on the known list but no longer there: take it off", c)
		}
	}
}
