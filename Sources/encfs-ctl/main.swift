import EncFSCLI
import EncFSMountCLI

CommandLineTool.main(CtlCommand.run)
