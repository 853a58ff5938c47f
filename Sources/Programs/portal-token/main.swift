import Composition
import Glibc

exit(Composition.main(arguments: CommandLine.arguments))
