module github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3

go 1.26
