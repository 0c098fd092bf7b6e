import EncFSCLI

CommandLineTool.main(RekeyCommand.run)
