// Package codegen stands in for the .NET code generator of pulumi-language-dotnet,
// which the Go module proxy here does not serve. The docker-build provider only
// names its CSharpPackageInfo in the language map of the schema it reports; the
// provider never generates a .NET SDK at run time, so the type is all it needs.
package codegen

// CSharpPackageInfo is the schema's "csharp" language entry (same JSON shape upstream).
type CSharpPackageInfo struct {
	RespectSchemaVersion bool              `json:"respectSchemaVersion,omitempty"`
	PackageReferences    map[string]string `json:"packageReferences,omitempty"`
}
