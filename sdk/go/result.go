package baton

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// encodeResult encodes a handler's variables as strict JSON Baton can store, or says why it
// cannot ("$.ratio is NaN, which is not JSON"): a bug in the handler, which retrying would not
// fix.
func encodeResult(variables map[string]any) (json.RawMessage, string) {
	encoded, problem := encodeVariables(variables)
	if problem != "" {
		return nil, "the handler's result cannot be sent: " + problem
	}
	return encoded, ""
}

// encodeVariables encodes variables (nil: nil) as strict JSON Baton can store, or says why it
// cannot ("$.ratio is NaN, which is not JSON").
func encodeVariables(variables map[string]any) (json.RawMessage, string) {
	if variables == nil {
		return nil, ""
	}
	encoded, err := encodeJSON(variables)
	if err == nil && !bytes.Contains(encoded, []byte(`\u0000`)) {
		return encoded, ""
	}
	problem := findProblem(reflect.ValueOf(variables), "$", 0)
	if problem == "" {
		if err != nil {
			problem = err.Error()
		} else {
			problem = "it contains a NUL character (\\u0000), which Baton cannot store"
		}
	}
	return nil, problem
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func member(path, key string) string {
	if identifier.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// findProblem walks v for what encoding/json refuses or Baton cannot store; "" if nothing.
func findProblem(v reflect.Value, path string, depth int) string {
	if depth > 1000 {
		return path + " is nested too deeply (a circular reference?), which is not JSON"
	}
	if !v.IsValid() {
		return ""
	}
	if v.Type().Implements(marshalerType) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		if _, err := json.Marshal(v.Interface()); err != nil {
			return fmt.Sprintf("%s (a %s) does not encode: %v", path, v.Type(), err)
		}
		return ""
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return findProblem(v.Elem(), path, depth+1)
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return path + " is NaN, which is not JSON"
		case math.IsInf(f, 1):
			return path + " is Infinity, which is not JSON"
		case math.IsInf(f, -1):
			return path + " is -Infinity, which is not JSON"
		}
	case reflect.String:
		return textProblem(v.String(), path)
	case reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			name := fmt.Sprint(k.Interface())
			if k.Kind() == reflect.String {
				if p := textProblem(name, "a key of "+path); p != "" {
					return p
				}
			}
			if p := findProblem(v.MapIndex(k), member(path, name), depth+1); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // []byte: base64
		}
		for i := range v.Len() {
			if p := findProblem(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); p != "" {
				return p
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if p := findProblem(v.Field(i), member(path, name), depth+1); p != "" {
				return p
			}
		}
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Sprintf("%s is a %s, which is not JSON", path, v.Type())
	}
	return ""
}

func textProblem(s, where string) string {
	if strings.ContainsRune(s, 0) {
		return where + " contains a NUL character (\\u0000), which Baton cannot store"
	}
	if !utf8.ValidString(s) {
		return where + " is not valid UTF-8"
	}
	return ""
}
