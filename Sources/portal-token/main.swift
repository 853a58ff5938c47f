import Glibc
import PortalTokenCLI

exit(PortalTokenCLI.main(arguments: CommandLine.arguments))
